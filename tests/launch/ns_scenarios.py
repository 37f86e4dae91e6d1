"""Cleanup scenarios of issue #9, each run as PID 1 of a private PID namespace:

    unshare -pf --mount-proc python -m tests.launch.ns_scenarios NAME TMPDIR

A scenario starts real launches and bystanders, kills kvplan where the scenario needs a crashed launch, runs
``kvplan cleanup`` (and nested namespaces where it needs them), and prints one JSON object of observations on its
last stdout line; tests/launch/test_cleanup.py asserts on them. Everything here lives in the private namespace,
the private state directory and the private shm directory: nothing on the machine can be signalled or removed,
and all that is left dies with the namespace when the scenario returns.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kvplan.launch.ownership import MARKER, token_hash

KVPLAN = [sys.executable, "-m", "kvplan"]
FAULTS = Path(__file__).with_name("faults")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
PIDNS = ["unshare", "-pf", "--mount-proc"]
SCENARIOS: dict[str, Callable[[Path], dict]] = {}


def scenario(fn: Callable[[Path], dict]) -> Callable[[Path], dict]:
    SCENARIOS[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------------------------------------------- helpers
def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    (tmp / "shm").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update({"KVPLAN_STATE_DIR": str(tmp / "state"), "KVPLAN_SHM_DIR": str(tmp / "shm"),
                "FAULT_SHM_DIR": str(tmp / "shm"), "FAULT_PIDS": str(tmp / "pids"), "PYTHONUNBUFFERED": "1"})
    env.pop(MARKER, None)
    env.pop("KVPLAN_LAUNCH_TOKEN", None)
    env.update(extra)
    return env


def stat_of(pid: int) -> tuple[str, int] | None:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return f[0], int(f[19])


def start_of(pid: int) -> int:
    s = stat_of(pid)
    return s[1] if s else -1


def alive(pid: int, start: int | None = None) -> bool:
    s = stat_of(pid)
    return bool(s) and s[0] not in ("Z", "X") and (start is None or s[1] == start)


def wait_for(cond: Callable[[], object], timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def reap() -> None:
    """PID 1 adopts every orphan: collect the exited ones."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def cleanup(env: dict, *args: str, prefix: tuple[str, ...] = ()) -> dict:
    t0 = time.monotonic()
    p = subprocess.run([*prefix, *KVPLAN, "cleanup", *args], capture_output=True, text=True, env=env, timeout=600,
                       stdin=subprocess.DEVNULL)
    return {"code": p.returncode, "out": p.stdout + p.stderr, "s": round(time.monotonic() - t0, 3)}


def state_files(tmp: Path) -> list[dict]:
    out = []
    for p in sorted((tmp / "state").glob("*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            pass
    return out


def start_launch(tmp: Path, command: list[str], env: dict, prefix: tuple[str, ...] = (), n_procs: int = 1,
                 shm: bool = False) -> subprocess.Popen:
    """``kvplan launch`` of *command*; returns once the state file records *n_procs* processes (and a segment)."""
    kv = subprocess.Popen([*prefix, *KVPLAN, "launch", "--plain", "--log", str(tmp / "server.log"), "--", *command],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

    def ready() -> bool:
        st = state_files(tmp)
        return bool(st) and len(st[0].get("processes", [])) >= n_procs and (bool(st[0].get("shm")) or not shm)

    if not wait_for(ready, 60):
        raise RuntimeError(f"the launch did not get going: {state_files(tmp)}")
    return kv


def fault_pids(tmp: Path) -> list[tuple[int, int]]:
    p = tmp / "pids"
    return [tuple(map(int, x.split())) for x in p.read_text().splitlines() if x] if p.exists() else []


def spawn(argv: list[str], env: dict | None = None, title: str | None = None, user: list[str] = (), **kw
          ) -> subprocess.Popen:
    """A bystander (its parent is this PID 1: a container launcher's children look exactly like this)."""
    if title:
        argv = ["bash", "-c", f'exec -a "{title}" ' + " ".join(argv)]
    argv = [*user, *argv]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def marked(launch_id: str) -> list[int]:
    """Visible processes carrying KVPLAN_LAUNCH=launch_id (read from /proc, independent of kvplan)."""
    needle, out = f"\0{MARKER}={launch_id}\0".encode(), []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if needle in b"\0" + Path(f"/proc/{d}/environ").read_bytes() + b"\0" and alive(int(d)):
                    out.append(int(d))
            except OSError:
                pass
    return sorted(out)


def ns_inode() -> int:
    return os.stat("/proc/self/ns/pid").st_ino


def dead_pid() -> tuple[int, int]:
    """(pid, start) of a process that ran and is gone."""
    p = subprocess.Popen(["true"])
    pid = p.pid
    st = start_of(pid)
    p.wait()
    return pid, st


def state_record(tmp: Path, launch_id: str, processes: list[list[int]], shm: list[dict], shm_dir: str | None = None,
                 token: str | None = None, **extra) -> dict:
    """A well-formed state file of a launch whose kvplan is gone (a pid that ran and exited)."""
    kv_pid, kv_start = dead_pid()
    return {"schema": 2, "id": launch_id, "uid": os.getuid(),
            "token_sha256": token_hash(token or secrets.token_hex(16)),
            "kvplan": {"pid": kv_pid, "start": kv_start, "ns": ns_inode()}, "processes": processes,
            "shm_dir": shm_dir or str(tmp / "shm"), "shm": shm, "argv": ["x"], "log": None, "status": "running",
            "started_at": 0.0, **extra}


def write_state(d: Path, name: str, data: object, mode: int = 0o600) -> Path:
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    p = d / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    os.chmod(p, mode)
    return p


def seg_entry(path: Path) -> dict:
    st = os.lstat(path)
    return {"name": path.name, "ino": st.st_ino, "dev": st.st_dev}


def set_next_pid(pid: int) -> None:
    Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))


def fault(name: str, *args: str) -> list[str]:
    return [sys.executable, str(FAULTS / name), *args]


# ---------------------------------------------------------------------------------------------------- scenarios
@scenario
def crashed(tmp: Path) -> dict:
    """A launch whose kvplan was SIGKILLed, next to bystanders a container's PID 1 would have: an unmarked process,
    look-alike engine titles with parent pid 1 (one of another uid), a process with the launch's id but a forged
    token; plus files in the shm directory the launch never recorded."""
    env = env_for(tmp)
    kv = start_launch(tmp, fault("alloc_steps.py", "--max-mib", "16", "--shm-mib", "8", "--workers", "2"), env,
                      n_procs=3, shm=True)
    if not wait_for(lambda: len(fault_pids(tmp)) == 3, 60):
        raise RuntimeError(f"the fault's 3 processes did not all start: {fault_pids(tmp)}")
    lid = state_files(tmp)[0]["id"]
    launched = fault_pids(tmp)
    clean = {k: v for k, v in env.items() if not k.startswith("FAULT_")}
    by = {"plain": spawn(["sleep", "600"], clean),
          "vllm_title": spawn(["sleep", "600"], clean, title="VLLM::Worker_TP0"),
          "sglang_title_nobody": spawn(["sleep", "600"], clean, title="sglang::scheduler_TP0", user=NOBODY),
          "forged_token": spawn(["sleep", "600"], {**clean, MARKER: lid,
                                                   "KVPLAN_LAUNCH_TOKEN": secrets.token_hex(16)})}
    for name in ("psm_not_recorded", "notes.txt"):
        (tmp / "shm" / name).write_bytes(b"x" * 8192)
    os.utime(tmp / "shm" / "psm_not_recorded", (time.time() - 3600, time.time() - 3600))
    time.sleep(0.3)
    kv.send_signal(signal.SIGKILL)
    kv.wait()
    obs: dict = {"launched": launched, "id": lid}
    obs["dry"] = cleanup(env, "--dry-run")
    obs["alive_after_dry"] = [alive(*p) for p in launched]
    obs["noyes"] = cleanup(env)
    obs["alive_after_noyes"] = [alive(*p) for p in launched]
    obs["yes"] = cleanup(env, "--yes", "--min-age", "0")
    reap()
    obs["alive_after_yes"] = [alive(*p) for p in launched]
    obs["bystanders_alive"] = {k: alive(p.pid) for k, p in by.items()}
    obs["bystander_ppids"] = {k: int(Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                              for k, p in by.items()}
    obs["shm_left"] = sorted(os.listdir(tmp / "shm"))
    obs["state_left"] = sorted(p.name for p in (tmp / "state").glob("*.json"))
    obs["again"] = cleanup(env, "--dry-run")
    return obs


@scenario
def pid_reuse(tmp: Path) -> dict:
    """A stale state file (kvplan killed long ago) names a root pid and a kvplan pid that unrelated new processes
    now have: a session leader (the old rule took "its session, started after the root") carrying the launch id."""
    env = env_for(tmp)
    lid = "20250101-000000-deadbeef"
    gone_pid, gone_start = dead_pid()
    rec = state_record(tmp, lid, [[gone_pid, gone_start]], [])
    kv_pid = rec["kvplan"]["pid"]
    write_state(tmp / "state", f"{lid}.json", rec)
    time.sleep(0.1)  # start times are in clock ticks: a new process gets a later one
    victims = {}
    for name, pid in (("root_pid_reused", gone_pid), ("kvplan_pid_reused", kv_pid)):
        for _ in range(20):
            set_next_pid(pid)
            p = spawn(["sleep", "600"], {**env, MARKER: lid}, start_new_session=True)
            if p.pid == pid:
                break
            p.kill()
            p.wait()
        victims[name] = p
    obs: dict = {"reused": {k: p.pid for k, p in victims.items()}, "wanted": [gone_pid, kv_pid]}
    obs["yes"] = cleanup(env, "--yes")
    obs["victims_alive"] = {k: alive(p.pid) for k, p in victims.items()}
    obs["victim_is_session_leader"] = os.getsid(victims["root_pid_reused"].pid) == gone_pid
    obs["state_left"] = sorted(p.name for p in (tmp / "state").glob("*.json"))
    return obs


def _inner_kvplan(lid: str) -> int | None:
    """The visible pid of the kvplan that supervises *lid* in a nested namespace (its state file names it)."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes()
            except OSError:
                continue
            if cmd.startswith(sys.executable.encode() + b"\0-m\0kvplan\0launch") and alive(int(d)):
                status = Path(f"/proc/{d}/status").read_text()
                nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid"))
                if len(nspid) > 1:
                    return int(d)
    return None


@scenario
def launch_in_child_namespace(tmp: Path) -> dict:
    """A healthy launch inside a nested PID namespace (a container) and cleanup outside it: left alone while its
    kvplan lives; once that kvplan is killed, the outside cleanup finds the launch's processes by namespace."""
    env = env_for(tmp)
    inner = ["sh", "-c", 'env "$@"; sleep 600', "sh", *KVPLAN, "launch", "--plain", "--log", str(tmp / "server.log"),
             "--", *fault("alloc_steps.py", "--max-mib", "16", "--shm-mib", "8", "--workers", "1")]
    holder = subprocess.Popen([*PIDNS, *inner], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ok = wait_for(lambda: state_files(tmp) and len(state_files(tmp)[0]["processes"]) >= 2
                  and state_files(tmp)[0]["shm"], 60)
    lid = state_files(tmp)[0]["id"] if ok else ""
    obs: dict = {"started": bool(ok), "holder": holder.pid}
    obs["state_ns_differs"] = bool(ok) and state_files(tmp)[0]["kvplan"]["ns"] != ns_inode()
    obs["marked_before"] = marked(lid)
    obs["yes_live"] = cleanup(env, "--yes")
    obs["marked_after_live"] = marked(lid)
    obs["shm_after_live"] = sorted(os.listdir(tmp / "shm"))
    kvp = _inner_kvplan(lid)
    obs["inner_kvplan_found"] = kvp is not None
    if kvp:
        os.kill(kvp, signal.SIGKILL)
        wait_for(lambda: not alive(kvp), 60)  # the observations below show if it did not
    obs["yes_dead"] = cleanup(env, "--yes")
    reap()
    wait_for(lambda: not marked(lid), 60)  # marked_after_dead shows if it did not
    obs["marked_after_dead"] = marked(lid)
    obs["shm_after_dead"] = sorted(os.listdir(tmp / "shm"))
    return obs


@scenario
def cleanup_in_child_namespace(tmp: Path) -> dict:
    """The launch runs here; cleanup runs in a nested PID namespace (pids there mean other processes): it cannot see
    the launch, so it leaves it alone, whether or not the launch's kvplan still runs."""
    env = env_for(tmp)
    kv = start_launch(tmp, fault("alloc_steps.py", "--max-mib", "16", "--shm-mib", "8"), env, n_procs=1, shm=True)
    lid = state_files(tmp)[0]["id"]
    obs: dict = {"marked_before": marked(lid)}
    obs["child_live"] = cleanup(env, "--yes", prefix=tuple(PIDNS))
    kv.send_signal(signal.SIGKILL)
    kv.wait()
    obs["child_dead"] = cleanup(env, "--yes", prefix=tuple(PIDNS))
    obs["marked_after"] = marked(lid)
    obs["shm_after"] = sorted(os.listdir(tmp / "shm"))
    obs["here_dead"] = cleanup(env, "--yes")  # the positive control, from the launch's own namespace
    reap()
    obs["marked_after_here"] = marked(lid)
    obs["shm_after_here"] = sorted(os.listdir(tmp / "shm"))
    return obs


@scenario
def other_uid(tmp: Path) -> dict:
    """The launched command starts a child as another user (nobody): it inherits the secret and is recorded, but
    cleanup (as root) touches only processes of its own uid. And cleanup run as nobody ignores root's state dir."""
    env = env_for(tmp)
    cmd = ["bash", "-c", f"{' '.join(NOBODY)} sleep 600 & exec {' '.join(fault('alloc_steps.py', '--max-mib', '16'))}"]
    kv = start_launch(tmp, cmd, env, n_procs=2)
    lid = state_files(tmp)[0]["id"]
    procs = [tuple(p) for p in state_files(tmp)[0]["processes"]]
    uids: dict = {}
    # the child is recorded when it forks, as root; setpriv drops to nobody a moment later (on a loaded 2-core CI
    # machine both read 0 once): read the uids once the drop has happened, or after 10 s as they are
    deadline = time.monotonic() + 10
    while True:
        for pid, _st in procs:
            try:
                uids[pid] = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
            except (OSError, IndexError, ValueError):
                pass
        if 65534 in uids.values() or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    kv.send_signal(signal.SIGKILL)
    kv.wait()
    obs: dict = {"uids": uids}
    nobody_dir = Path(tempfile.mkdtemp(prefix="kvplan-nobody-"))
    try:
        os.chmod(nobody_dir, 0o755)
        obs["as_nobody"] = cleanup({**env, "HOME": str(nobody_dir)}, "--yes", prefix=tuple(NOBODY))
    finally:
        os.rmdir(nobody_dir)
    obs["marked_after_nobody"] = marked(lid)
    obs["yes"] = cleanup(env, "--yes")
    reap()
    obs["alive_by_uid"] = {str(uids.get(pid)): alive(pid, st) for pid, st in procs if pid in uids}
    return obs


@scenario
def hostile_state_files(tmp: Path) -> dict:
    """Every adversarial state file of the issue, and real-looking ones that point at files the launch never
    owned: nothing but the one segment a well-formed record proves is removed; each bad file is a warning."""
    env = env_for(tmp)
    shm, vic, st = tmp / "shm", tmp / "victims", tmp / "state"
    vic.mkdir()
    st.mkdir(mode=0o700)
    for p in ("abs_victim", "dd_victim", "other_dir_victim", "link_target"):
        (vic / p).write_bytes(b"v" * 4096)
    for p in ("psm_ok", "psm_replaced", "psm_mapped", "psm_nobody", "ab", "sub"):
        (shm / p).write_bytes(b"s" * 4096) if p != "sub" else (shm / p).mkdir()
    (shm / "sub" / "x").write_bytes(b"s")
    os.symlink(vic / "link_target", shm / "psm_link")
    os.chown(shm / "psm_nobody", 65534, 65534)
    old_replaced = seg_entry(shm / "psm_replaced")
    (shm / "psm_replaced").unlink()
    (shm / "psm_replaced").write_bytes(b"new")  # same name, another file (another inode)
    if old_replaced["ino"] == os.lstat(shm / "psm_replaced").st_ino:
        old_replaced["ino"] += 1
    mapper = subprocess.Popen([*PIDNS, sys.executable, "-c",
                               f"import mmap, time\nf = open({str(shm / 'psm_mapped')!r}, 'r+b')\n"
                               "m = mmap.mmap(f.fileno(), 4096)\nprint('mapped', flush=True)\ntime.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    # mapped, in a nested PID namespace (a line, or a loud failure after 60 s: never a read that can hang)
    assert select.select([mapper.stdout], [], [], 60)[0] and mapper.stdout.readline().strip() == "mapped", \
        "the mapper did not map its segment within 60 s"
    rec = lambda lid, shm_list, **kw: state_record(tmp, lid, [], shm_list, **kw)  # noqa: E731
    files = {
        "bad-json": "{not json", "a-list": "[1, 2, 3]", "deep": "[" * 200_000 + "]" * 200_000,
        "binary": "\x00\x01\x02", "empty": "",
        "shm-string": rec("shm-string", "ab"),
        "abs-path": rec("abs-path", [{**seg_entry(vic / "abs_victim"), "name": str(vic / "abs_victim")}]),
        "dotdot": rec("dotdot", [{**seg_entry(vic / "dd_victim"), "name": "../victims/dd_victim"}]),
        "slash": rec("slash", [{**seg_entry(shm / "sub" / "x"), "name": "sub/x"}]),
        "dot": rec("dot", [{"name": "..", "ino": 1, "dev": 1}]),
        "other-shm-dir": rec("other-shm-dir", [seg_entry(vic / "other_dir_victim")], shm_dir=str(vic)),
        "old-format": {"id": "old-format", "kvplan": "1:1", "sid": 1, "root_start": 0, "shm_dir": str(vic),
                       "shm": ["abs_victim", "../victims/dd_victim"], "status": "running"},
        "wrong-types": {**rec("wrong-types", []), "processes": "12", "kvplan": ["a"]},
        "no-kvplan": {k: v for k, v in rec("no-kvplan", []).items() if k != "kvplan"},
        "id-mismatch": rec("someone-else", [seg_entry(shm / "ab")]),
        "replaced-inode": rec("replaced-inode", [old_replaced]),
        "symlink-segment": rec("symlink-segment", [seg_entry(shm / "psm_link")]),
        "mapped-elsewhere": rec("mapped-elsewhere", [seg_entry(shm / "psm_mapped")]),
        "nobody-segment": rec("nobody-segment", [seg_entry(shm / "psm_nobody")]),
        "ok": rec("ok", [seg_entry(shm / "psm_ok")]),
    }
    for name, data in files.items():
        write_state(st, f"{name}.json", data)
    outside = write_state(vic, "linked.json", rec("linked", [seg_entry(shm / "ab")]))
    os.symlink(outside, st / "linked.json")
    os.mkfifo(st / "fifo.json")
    write_state(st, "world-writable.json", rec("world-writable", [seg_entry(shm / "ab")]), mode=0o666)
    write_state(st, "nobody-owned.json", rec("nobody-owned", [seg_entry(shm / "ab")]))
    os.chown(st / "nobody-owned.json", 65534, 65534)
    write_state(st, "huge.json", json.dumps(rec("huge", [seg_entry(shm / "ab")])) + " " * (2 << 20))
    obs: dict = {"files": sorted(p.name for p in st.iterdir())}
    obs["yes"] = cleanup(env, "--yes")
    obs["victims"] = sorted(os.listdir(vic))
    obs["shm"] = sorted(os.listdir(shm))
    obs["sub"] = sorted(os.listdir(shm / "sub"))
    obs["state_left"] = sorted(p.name for p in st.iterdir())
    # untrusted directories: a symlink to the state dir, group/other-writable, another owner
    os.symlink(st, tmp / "state-link")
    obs["dir_symlink"] = cleanup({**env, "KVPLAN_STATE_DIR": str(tmp / "state-link")}, "--yes")
    (tmp / "state-777").mkdir()
    os.chmod(tmp / "state-777", 0o777)
    write_state(tmp / "state-777", "x.json", rec("x", [seg_entry(shm / "ab")]))
    obs["dir_777"] = cleanup({**env, "KVPLAN_STATE_DIR": str(tmp / "state-777")}, "--yes")
    (tmp / "state-nobody").mkdir(mode=0o700)
    write_state(tmp / "state-nobody", "y.json", rec("y", [seg_entry(shm / "ab")]))
    os.chown(tmp / "state-nobody", 65534, 65534)
    obs["dir_nobody"] = cleanup({**env, "KVPLAN_STATE_DIR": str(tmp / "state-nobody")}, "--yes")
    obs["shm_final"] = sorted(os.listdir(shm))
    obs["mapper_alive"] = mapper.poll() is None
    mapper.kill()
    return obs


@scenario
def bad_state_file(tmp: Path) -> dict:
    """Issue #22: the state file of a gone launch records a live process that does not carry the launch's secret
    (never provable, so never stopped). Before: every cleanup exited 2 (UnboundLocalError in the note), or, once
    another process with the launch's marker was about, the note named that process and --yes deleted the state file
    while the recorded process ran. Plus stale files that are hard links (st_nlink 2), a hard-linked segment, and
    (in this process, kvplan imported) a record whose processing raises: cleanup reports it and goes on."""
    env = env_for(tmp)
    st, vic, shm = tmp / "state", tmp / "victims", tmp / "shm"
    vic.mkdir()
    st.mkdir(mode=0o700)
    token = secrets.token_hex(16)
    clean = {k: v for k, v in env.items() if not k.startswith("FAULT_")}
    live = spawn(["sleep", "600"], clean)  # recorded by the launch, but without its secret
    wait_for(lambda: start_of(live.pid) > 0)
    write_state(st, "gone-live.json", state_record(tmp, "gone-live", [[live.pid, start_of(live.pid)]], [],
                                                   token=token))
    (shm / "psm_linked").write_bytes(b"s" * 4096)
    os.link(shm / "psm_linked", vic / "psm_linked_too")  # same tmpfs / fs: st_nlink 2
    write_state(st, "stale-ok.json", state_record(tmp, "stale-ok", [], []))
    write_state(st, "stale-seg.json", state_record(tmp, "stale-seg", [], [seg_entry(shm / "psm_linked")]))
    linked = write_state(st, "hardlinked.json", state_record(tmp, "hardlinked", [], []))
    os.link(linked, vic / "keep.json")
    obs: dict = {"live": live.pid}
    obs["dry_unbound"] = cleanup(env, "--dry-run")  # no process carries the marker: the note's loop never ran
    marked_proc = spawn(["sleep", "601"], {**clean, MARKER: "gone-live", "KVPLAN_LAUNCH_TOKEN": token})
    wait_for(lambda: start_of(marked_proc.pid) > 0)
    time.sleep(0.2)
    obs["dry_bound"] = cleanup(env, "--dry-run")  # a marked, unrecorded process: the old note named it
    obs["yes"] = cleanup(env, "--yes")
    obs["alive_after_yes"] = {"recorded": alive(live.pid), "marked": alive(marked_proc.pid)}
    obs["state_left"] = sorted(p.name for p in st.glob("*.json"))
    obs["victims"] = sorted(os.listdir(vic))
    obs["shm"] = sorted(os.listdir(shm))
    # in-process: one record whose processing raises does not stop the others (kvplan imported here, in PID 1)
    os.environ.update({"KVPLAN_STATE_DIR": str(st), "KVPLAN_SHM_DIR": str(shm)})
    write_state(st, "stale-two.json", state_record(tmp, "stale-two", [], []))
    import contextlib
    import io

    from kvplan.launch import cleanup as kv_cleanup

    real = kv_cleanup._proven

    def broken(rec, *a, **kw):
        if rec.id == "gone-live":
            raise RuntimeError("simulated fault")
        return real(rec, *a, **kw)

    kv_cleanup._proven = broken
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = kv_cleanup.run(yes=True)
    kv_cleanup._proven = real
    obs["raising"] = {"code": code, "out": out.getvalue()}
    obs["state_left_after_raising"] = sorted(p.name for p in st.glob("*.json"))
    obs["alive_after_raising"] = alive(live.pid)
    return obs


def main() -> int:
    name, tmp = sys.argv[1], Path(sys.argv[2])
    if os.getpid() != 1:
        print(json.dumps({"error": "not PID 1 of a private PID namespace"}))
        return 2
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    obs = SCENARIOS[name](tmp)
    sys.stdout.flush()
    print("\n" + json.dumps(obs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
