"""``kvplan cleanup`` on what a crashed launch really left (kvplan SIGKILLed mid-launch), on orphaned engine ranks
and stale segments; and what it must never touch. Segments live in a private $KVPLAN_SHM_DIR so that the machine's
/dev/shm is left alone."""

from __future__ import annotations

import json
import mmap
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.launch.helpers import KVPLAN, cleanup_cli, env_for, fault


def _alive(pid: int, start: int | None = None) -> bool:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return f[0] != "Z" and (start is None or int(f[19]) == start)


def _wait_for(cond, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def crashed(tmp_path):
    """A launch (3 processes, one /dev/shm segment) whose kvplan was SIGKILLed: its tree and state file remain."""
    shm = tmp_path / "shm"
    shm.mkdir()
    env = env_for(tmp_path, KVPLAN_SHM_DIR=str(shm), FAULT_SHM_DIR=str(shm))
    kv = subprocess.Popen([*KVPLAN, "launch", "--plain", "--log", str(tmp_path / "server.log"), "--",
                           *fault("alloc_steps.py", "--max-mib", "16", "--shm-mib", "8", "--workers", "2")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    states = tmp_path / "state"

    def ready():
        files = list(states.glob("*.json"))
        pids = (tmp_path / "pids").read_text().split("\n") if (tmp_path / "pids").exists() else []
        return files and json.loads(files[0].read_text())["shm"] and len([p for p in pids if p]) == 3

    assert _wait_for(ready), "the launch did not get going"
    kv.send_signal(signal.SIGKILL)
    kv.wait()
    pids = [tuple(map(int, x.split())) for x in (tmp_path / "pids").read_text().split("\n") if x]
    assert all(_alive(*p) for p in pids)
    yield tmp_path, env, pids, shm
    for pid, start in pids:  # never leave them, even when the test fails
        if _alive(pid, start):
            os.kill(pid, signal.SIGKILL)


def test_cleanup_removes_a_crashed_launch_after_confirmation(crashed):
    tmp, env, pids, shm = crashed
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # no marker: not ours
    try:
        code, out = cleanup_cli(tmp, "--dry-run", env=env)
        assert code == 0 and "state file" in out and "its kvplan is gone" in out and "psm_kvtest" in out, out
        assert all(_alive(*p) for p in pids)
        code, out = cleanup_cli(tmp, env=env)  # no terminal to confirm on, no --yes
        assert code == 1 and "pass --yes" in out and all(_alive(*p) for p in pids)
        code, out = cleanup_cli(tmp, "--yes", env=env)
        assert code == 0 and "stopped" in out and "removed 1 segment(s)" in out, out  # (another session's
        assert not any(_alive(*p) for p in pids)  # leftovers may be stopped too: only ours are counted here)
        assert not list(shm.iterdir()) and not list((tmp / "state").glob("*.json"))
        assert _alive(bystander.pid)
        code, out = cleanup_cli(tmp, "--dry-run", env=env)
        assert code == 0 and "state file" not in out and str(shm) not in out
    finally:
        bystander.kill()
        bystander.wait()


def test_cleanup_finds_marked_processes_without_a_state_file(crashed):
    tmp, env, pids, shm = crashed
    env = {**env, "KVPLAN_STATE_DIR": str(tmp / "elsewhere")}
    code, out = cleanup_cli(tmp, "--yes", env=env)
    assert code == 0 and "processes marked KVPLAN_LAUNCH_ID" in out, out
    assert not any(_alive(*p) for p in pids)


def _orphan(title: str, tmp: Path) -> int:
    """A process titled like an engine rank whose parent is gone (re-parented to pid 1); returns its pid."""
    pidfile = tmp / f"orphan-{os.getpid()}-{time.monotonic_ns()}"
    code = (f"import os, sys, time\nif os.fork() == 0:\n    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
            "    time.sleep(60)\n")
    subprocess.run([title, "-c", code], executable=sys.executable, check=True, timeout=30)
    assert _wait_for(lambda: pidfile.exists() and pidfile.read_text())
    return int(pidfile.read_text())


def test_orphaned_engine_ranks_go_but_other_processes_stay(tmp_path):
    env = env_for(tmp_path, KVPLAN_SHM_DIR=str(tmp_path))
    rank = _orphan("VLLM::Worker_TP0", tmp_path)
    plain = _orphan("python3", tmp_path)  # orphaned too, but nothing ties it to an engine
    parented = subprocess.Popen(["sglang::scheduler_TP0", "-c", "import time; time.sleep(60)"],
                                executable=sys.executable)  # an engine title whose parent (pytest) lives
    try:
        assert _wait_for(lambda: Path(f"/proc/{rank}/stat").read_text().rsplit(")", 1)[1].split()[1] == "1")
        code, out = cleanup_cli(tmp_path, "--yes", env=env)
        assert code == 0 and f"orphaned engine rank {rank}" in out, out
        assert _wait_for(lambda: not _alive(rank))
        assert _alive(plain) and _alive(parented.pid)
    finally:
        for pid in (rank, plain):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        parented.kill()
        parented.wait()


def test_stale_segments_only_unused_engine_ones(tmp_path):
    env = env_for(tmp_path, KVPLAN_SHM_DIR=str(tmp_path / "shm"))
    d = tmp_path / "shm"
    d.mkdir()
    for name in ("psm_stale", "sem.mp-stale", "notes.txt", "psm_inuse"):
        (d / name).write_bytes(b"x" * 8192)
    with open(d / "psm_inuse", "r+b") as f, mmap.mmap(f.fileno(), 8192):  # mapped by this live process
        code, out = cleanup_cli(tmp_path, "--yes", "--min-age", "0", env=env)
        assert code == 0 and "removed 2 segment(s)" in out, out  # psm_stale and sem.mp-stale
        assert sorted(p.name for p in d.iterdir()) == ["notes.txt", "psm_inuse"]
    (d / "psm_new").write_bytes(b"x")
    code, out = cleanup_cli(tmp_path, "--dry-run", env=env)  # default --min-age 60: a new file is not stale yet
    assert code == 0 and "psm_new" not in out
