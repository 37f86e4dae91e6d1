"""Run ``kvplan launch`` / ``kvplan cleanup`` as a user would (a subprocess: kvplan becomes the subreaper of the
launch, not pytest) and check that nothing of a launch is left.

Every launch runs in a private PID namespace (``unshare -pf --mount-proc``, PID 1 = ``nsinit.py``), with a private
state directory and a private shm directory: kvplan can see and signal nothing but its own test processes, and
whatever a test leaks dies with the namespace. ``nsinit`` reports what was still alive when kvplan exited."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

FAULTS = Path(__file__).with_name("faults")
KVPLAN = [sys.executable, "-m", "kvplan"]
NSINIT = Path(__file__).with_name("nsinit.py")
PIDNS = ["unshare", "-pf", "--mount-proc", sys.executable, str(NSINIT)]  # needs root (CAP_SYS_ADMIN)


@dataclass
class Run:
    code: int
    out: str
    err: str
    events: list[dict]
    pids: list[tuple[int, int]]  # (pid, start ticks) the fault programs recorded
    log: str
    started: float  # time.monotonic() before kvplan started
    ended: float  # ... after it exited
    launch_id: str = ""
    shm_before: set[str] = field(default_factory=set)
    left: list[dict] | None = None  # what nsinit found alive in the namespace once kvplan exited
    shm_dir: str = "/dev/shm"

    def event(self, kind: str) -> dict | None:
        return next((e for e in self.events if e["event"] == kind), None)

    @property
    def reason(self) -> str | None:
        a = self.event("abort")
        return a["reason"] if a else None

    def phases(self) -> list[str]:
        return [e["phase"] for e in self.events if e["event"] == "phase"]

    def spawned(self) -> float:
        """An upper bound of kvplan's own t = 0 on CLOCK_MONOTONIC: the fork of the launched command (its start time
        in /proc, in clock ticks since boot), which kvplan does after it sets t = 0. ``spawned() + event["t"]`` is
        then no earlier than the event itself, so a latency computed from it is never understated."""
        assert self.pids, "the launched command recorded no pid"
        start_ticks = self.pids[0][1]  # the root records itself first
        boot_minus_mono = time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()
        return (start_ticks + 1) / os.sysconf("SC_CLK_TCK") - boot_minus_mono  # +1 tick: the stamp's resolution

    def at(self, kind: str) -> float:
        """When event *kind* happened on CLOCK_MONOTONIC (an upper bound: see spawned), comparable with the fault
        programs' ``t=`` stamps."""
        ev = self.event(kind)
        assert ev is not None, (kind, self.events)
        return self.spawned() + ev["t"]

    def crossed(self, mib: float) -> float | None:
        """When a single allocating process of the fault passed *mib* (its own stamp), or None if it never did."""
        for line in self.log.splitlines():
            m = re.search(r"allocated (\d+) MiB t=(\d+\.\d+)", line)
            if m and int(m.group(1)) >= mib:
                return float(m.group(2))
        return None

    def stamps(self, pattern: str) -> list[float]:
        """CLOCK_MONOTONIC stamps ``t=...`` of the log lines matching *pattern*."""
        return [float(m.group(1)) for line in self.log.splitlines() if re.search(pattern, line)
                for m in [re.search(r"\bt=(\d+\.\d+)", line)] if m]


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    """A private state dir and a private shm dir (for kvplan and for the fault programs' segments)."""
    (tmp / "shm").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update({"KVPLAN_STATE_DIR": str(tmp / "state"), "FAULT_PIDS": str(tmp / "pids"), "PYTHONUNBUFFERED": "1",
                "KVPLAN_SHM_DIR": str(tmp / "shm"), "FAULT_SHM_DIR": str(tmp / "shm")})
    env.update(extra)
    return env


def child_of(pid: int, timeout: float = 5.0) -> int | None:
    """The (first) child process of *pid*, waited for."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    if int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                        return int(d)
                except (OSError, IndexError, ValueError):
                    continue
        time.sleep(0.01)
    return None


def shm_names(d: str = "/dev/shm") -> set[str]:
    try:
        return set(os.listdir(d))
    except OSError:
        return set()


def launch(tmp: Path, args: list[str], command: list[str], timeout: float = 600.0, env: dict | None = None,
           signals: list[tuple[str, int]] = ()) -> Run:
    """``kvplan launch --plain --events E --log L ARGS -- COMMAND`` in a private PID namespace; *signals*: (log
    pattern, signum) sent to kvplan (through the namespace's init, which forwards them) one after the other, each
    once the server log shows its pattern: a state, not a delay, so a loaded machine's slow start cannot race them
    (kvplan installs its handlers before it starts the command)."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in ("pids", "events.jsonl", "server.log", "nsinit.json"):
        (tmp / name).unlink(missing_ok=True)
    ev, log, report = tmp / "events.jsonl", tmp / "server.log", tmp / "nsinit.json"
    env = dict(env or env_for(tmp))
    env["NSINIT_REPORT"] = str(report)
    shm_dir = env.get("KVPLAN_SHM_DIR", "/dev/shm")
    before = shm_names(shm_dir)
    t0 = time.monotonic()
    p = subprocess.Popen([*PIDNS, *KVPLAN, "launch", "--plain", "--events", str(ev), "--log", str(log), *args, "--",
                          *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    init = child_of(p.pid, timeout) if signals else None
    end = time.monotonic() + timeout
    for pattern, sig in signals:
        while p.poll() is None and not (log.exists() and re.search(pattern, log.read_text(errors="replace"))):
            if time.monotonic() > end:
                p.kill()
                raise AssertionError(f"the server log never showed {pattern!r} within {timeout} s")
            time.sleep(0.01)
        assert init, "the namespace's init was not found"
        os.kill(init, sig)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"kvplan launch did not finish in {timeout} s\n{out}\n{err}") from None
    t1 = time.monotonic()
    events = [json.loads(x) for x in ev.read_text().splitlines()] if ev.exists() else []
    pids = []
    if (tmp / "pids").exists():
        pids = [tuple(int(v) for v in line.split()) for line in (tmp / "pids").read_text().split("\n") if line]
    m = re.search(r"kvplan launch (\S+):", out)
    left = json.loads(report.read_text())["left"] if report.exists() else None
    return Run(p.returncode, out, err, events, pids, log.read_text(errors="replace") if log.exists() else "", t0,
               t1, m.group(1) if m else "", before, left, shm_dir)


def fault(name: str, *args: str) -> list[str]:
    return [sys.executable, str(FAULTS / name), *args]


def left_behind(run: Run) -> list[str]:
    """What of the run was still alive in its namespace when kvplan exited (nsinit's report; no report at all
    counts as a failure), and new psm_kvtest segments of its processes in its shm directory."""
    out = [f"pid {x['pid']} state {x['state']}: {x['cmd']}" for x in run.left or []]
    if run.left is None:
        out.append("no report from the namespace's init")
    out += kvtest_segments({pid for pid, _ in run.pids}, run.shm_dir)
    return out


def kvtest_segments(pids: set[int], d: str = "/dev/shm") -> list[str]:
    """The fault programs' segments (``psm_kvtest_<pid>_*``) created by *pids* that are still in *d*."""
    return [f"{d}/{n}" for n in shm_names(d) if n.startswith("psm_kvtest_") and int(n.split("_")[2]) in pids]


def cleanup_cli(tmp: Path, *args: str, env: dict | None = None, timeout: float = 600.0) -> tuple[int, str]:
    """``kvplan cleanup ARGS`` in a private PID namespace (it sees nothing but itself there)."""
    p = subprocess.run(["unshare", "-pf", "--mount-proc", *KVPLAN, "cleanup", *args], capture_output=True, text=True,
                       env=env or env_for(tmp),
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout + p.stderr
