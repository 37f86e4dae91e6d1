"""Run ``kvplan launch`` / ``kvplan cleanup`` as a user would (a subprocess: kvplan becomes the subreaper of the
launch, not pytest) and check, in /proc, that nothing of a launch is left."""

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

    def event(self, kind: str) -> dict | None:
        return next((e for e in self.events if e["event"] == kind), None)

    @property
    def reason(self) -> str | None:
        a = self.event("abort")
        return a["reason"] if a else None

    def phases(self) -> list[str]:
        return [e["phase"] for e in self.events if e["event"] == "phase"]

    def stamps(self, pattern: str) -> list[float]:
        """CLOCK_MONOTONIC stamps ``t=...`` of the log lines matching *pattern*."""
        return [float(m.group(1)) for line in self.log.splitlines() if re.search(pattern, line)
                for m in [re.search(r"\bt=(\d+\.\d+)", line)] if m]


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"KVPLAN_STATE_DIR": str(tmp / "state"), "FAULT_PIDS": str(tmp / "pids"), "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def shm_names(d: str = "/dev/shm") -> set[str]:
    try:
        return set(os.listdir(d))
    except OSError:
        return set()


def launch(tmp: Path, args: list[str], command: list[str], timeout: float = 30.0, env: dict | None = None,
           signals: list[tuple[float, int]] = ()) -> Run:
    """``kvplan launch --plain --events E --log L ARGS -- COMMAND``; *signals*: (delay s, signum) sent to kvplan,
    the delay counted from when the launched command has started (a fault program records its pid): kvplan
    installs its handlers before it starts the command, so a loaded machine's slow start cannot race them."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in ("pids", "events.jsonl", "server.log"):
        (tmp / name).unlink(missing_ok=True)
    ev, log = tmp / "events.jsonl", tmp / "server.log"
    before = shm_names()
    t0 = time.monotonic()
    p = subprocess.Popen([*KVPLAN, "launch", "--plain", "--events", str(ev), "--log", str(log), *args, "--", *command],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or env_for(tmp))
    t_cmd = t0
    if signals:
        while not (tmp / "pids").exists() and p.poll() is None and time.monotonic() < t0 + timeout:
            time.sleep(0.02)
        t_cmd = time.monotonic()
    for delay, sig in signals:
        time.sleep(max(0.0, t_cmd + delay - time.monotonic()))
        p.send_signal(sig)
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
    return Run(p.returncode, out, err, events, pids, log.read_text(errors="replace") if log.exists() else "", t0,
               t1, m.group(1) if m else "", before)


def fault(name: str, *args: str) -> list[str]:
    return [sys.executable, str(FAULTS / name), *args]


def left_behind(run: Run) -> list[str]:
    """Processes of the run still in /proc (same pid and start time, zombies included), processes still carrying
    its marker, and new psm_kvtest segments in /dev/shm."""
    out = []
    for pid, start in run.pids:
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = raw.rsplit(")", 1)[1].split()
        if int(fields[19]) == start:
            out.append(f"pid {pid} state {fields[0]}")
    if run.launch_id:
        needle = f"\0KVPLAN_LAUNCH_ID={run.launch_id}\0".encode()
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    env = b"\0" + Path(f"/proc/{d}/environ").read_bytes()
                except OSError:
                    continue
                if needle in env + b"\0":
                    out.append(f"marked pid {d}")
    out += kvtest_segments({pid for pid, _ in run.pids})
    return out


def kvtest_segments(pids: set[int]) -> list[str]:
    """The fault programs' segments (``psm_kvtest_<pid>_*``) created by *pids* that are still in /dev/shm (other
    sessions may run the same tests at the same time: only our own pids count)."""
    return [f"/dev/shm/{n}" for n in shm_names() if n.startswith("psm_kvtest_") and int(n.split("_")[2]) in pids]


def cleanup_cli(tmp: Path, *args: str, env: dict | None = None, timeout: float = 60.0) -> tuple[int, str]:
    p = subprocess.run([*KVPLAN, "cleanup", *args], capture_output=True, text=True, env=env or env_for(tmp),
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout + p.stderr
