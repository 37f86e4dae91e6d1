"""The five fault programs, 20 rounds in a row: every run ends with its reason, and over the 100 runs no process,
no state file and no /dev/shm segment is leaked. Slow (about 84 s plus a baseline): it runs with the slow suite (CI
runs all).

Each launch runs in its own PID namespace with private state and shm directories (tests/launch/helpers.py), and
the time bound is relative to a plain launch measured in the same run.

It used to fail (3 of 7 runs, exit 143, "the server exited by itself") when other work ran on the machine: a
process outside the launch SIGTERMed its server while its kvplan lived. The rules that could select a healthy launch
are gone (proof of ownership only, launch.ownership): `kvplan cleanup --yes`, which the old suite ran machine-wide,
stopped processes chosen by session id, ancestry, and markers whose owner it could not verify (seen while this was
written: other sessions' old test_cleanup SIGTERMed this branch's launches, whose marker had no owner tag: exit
143); and a supervisor trusted its session id and process group after reaping its root (pid_max is 32768 here). The
old code next to 17 runs of the old test_cleanup in a private namespace gave 100/100 right reasons, but 2.56 s per
run against the fixed 2.0 s bound at load 6-8: the other way this test failed when the machine was busy."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.launch.helpers import fault, kvtest_segments, launch, left_behind

pytestmark = pytest.mark.slow
ROUNDS = 20
CASES = [
    ("host-memory", ["--host-budget-gib", "0.3"], ("alloc_steps.py", "--shm-mib", "32")),
    ("ready-timeout", ["--ready-timeout", "0.4", "--grace", "0.2"], ("ignore_term.py",)),
    ("host-memory", ["--host-budget-gib", "0.3"], ("double_fork.py", "--clean-env")),
    ("rank-died", [], ("defunct_worker.py", "--life", "0.35")),
    ("stall", ["--stall-timeout", "0.3"], ("silent_climb.py",)),
]


def _marked(ids: set[str]) -> set[int]:
    """Processes carrying the marker of one of *ids* (other sessions' launches do not count)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                env = Path(f"/proc/{d}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(e.startswith(b"KVPLAN_LAUNCH=") and e[14:].decode() in ids for e in env):
                out.add(int(d))
    return out


def _zombie_children() -> list[int]:
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                f = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if f[0] == "Z" and int(f[1]) == me:
                out.append(int(d))
    return out


def _baseline_s(tmp_path) -> float:
    """What one `kvplan launch -- true` takes on this machine now (interpreter start-up, preflight, namespace):
    the time bound below is relative to it, so the test measures kvplan, not the machine's load."""
    took = []
    for i in range(3):
        run = launch(tmp_path / f"base{i}", [], ["true"])
        assert run.code == 0, run.err
        took.append(run.ended - run.started)
    return sorted(took)[1]


@pytest.mark.slow
def test_twenty_rounds_leak_nothing(tmp_path):
    base = _baseline_s(tmp_path)
    t0, reasons, ids, pids, dirs = time.monotonic(), [], set(), set(), []
    for i in range(ROUNDS):
        for j, (reason, args, prog) in enumerate(CASES):
            run = launch(tmp_path / f"r{i}-{j}", args, fault(*prog))
            reasons.append(run.reason)
            ids.add(run.launch_id)
            pids |= {p for p, _ in run.pids}
            dirs.append(run.shm_dir)
            assert run.code == 3 and run.reason == reason, (i, prog, run.out, run.err)
            assert not left_behind(run), (i, prog, left_behind(run))
    took = time.monotonic() - t0
    assert reasons == [c[0] for c in CASES] * ROUNDS
    assert len(ids) == ROUNDS * len(CASES)
    assert not _marked(ids)
    assert not [seg for d in dirs for seg in kvtest_segments(pids, d)]
    assert not list(tmp_path.glob("*/state/*.json")), "state files of finished launches must be removed"
    assert not _zombie_children()
    # each fault ends within ~1 s of its start (timeouts 0.3-0.4 s, grace 0.2-1 s) on top of a plain launch
    assert took / (ROUNDS * len(CASES)) < max(2.0, base + 1.5), f"{took:.1f} s for {ROUNDS * len(CASES)} runs " \
        f"(a plain launch: {base:.2f} s)"
