"""The five fault programs, 20 rounds in a row: every run ends with its reason, and over the 100 runs no process,
no state file and no /dev/shm segment is leaked. Slow (about 100 s): it runs with the slow suite (CI runs
all).

Each launch runs in its own PID namespace with private state and shm directories (tests/launch/helpers.py).

It used to fail (3 of 7 runs, exit 143, "the server exited by itself") when other work ran on the machine: a
process outside the launch SIGTERMed its server while its kvplan lived. The rules that could select a healthy launch
are gone (proof of ownership only, launch.ownership): `kvplan cleanup --yes`, which the old suite ran machine-wide,
stopped processes chosen by session id, ancestry, and markers whose owner it could not verify (seen while this was
written: other sessions' old test_cleanup SIGTERMed this branch's launches, whose marker had no owner tag: exit
143); and a supervisor trusted its session id and process group after reaping its root (pid_max is 32768 here). The
old code next to 17 runs of the old test_cleanup in a private namespace gave 100/100 right reasons, but 2.56 s per
run against a fixed 2.0 s bound on the test's wall clock at load 6-8: the other way this test failed when the machine
was busy. The time bounds are now kvplan's own, read on its event clock and the faults' stamps (as in
test_faults.py): each abort within 2 s of its condition, each stop within its grace + 1 s; how long the machine takes
to start interpreters is not judged."""

from __future__ import annotations

import os
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
    ("stall", ["--stall-timeout", "1"], ("silent_climb.py",)),  # 1 s: more than a busy machine's interpreter start
]
MAX_LATENCY_S = 2.0  # from the condition to kvplan's abort (test_faults.py)


def _late(run, reason: str) -> float | None:
    """Seconds from the fault's condition to kvplan's abort, on the processes' own clocks (None: the condition has
    no stamp, e.g. a budget crossing the prediction stopped before it happened)."""
    if reason == "ready-timeout":
        return run.event("abort")["t"] - 0.4  # kvplan's clock from the spawn
    if reason == "host-memory":
        crossed = run.crossed(0.3 * 1024 - 32)
        return None if crossed is None else run.at("abort") - crossed
    if reason == "rank-died":
        return run.at("abort") - run.stamps("illegal memory access")[0]
    return run.at("abort") - (run.stamps("Capture cuda graph begin")[0] + 1.0)  # stall


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


@pytest.mark.slow
def test_twenty_rounds_leak_nothing(tmp_path):
    reasons, ids, pids, dirs, late, stops = [], set(), set(), [], [], []
    load = [os.getloadavg()[0]]
    for i in range(ROUNDS):
        for j, (reason, args, prog) in enumerate(CASES):
            run = launch(tmp_path / f"r{i}-{j}", args, fault(*prog))
            reasons.append(run.reason)
            ids.add(run.launch_id)
            pids |= {p for p, _ in run.pids}
            dirs.append(run.shm_dir)
            assert run.code == 3 and run.reason == reason, (i, prog, run.out, run.err)
            assert not left_behind(run), (i, prog, left_behind(run))
            grace = float(args[args.index("--grace") + 1]) if "--grace" in args else 1.0
            stops.append((run.event("exit")["stop_s"], grace, prog[0]))
            late.append((_late(run, reason), prog[0]))
        load.append(os.getloadavg()[0])
    assert reasons == [c[0] for c in CASES] * ROUNDS
    assert len(ids) == ROUNDS * len(CASES)
    assert not _marked(ids)
    assert not [seg for d in dirs for seg in kvtest_segments(pids, d)]
    assert not list(tmp_path.glob("*/state/*.json")), "state files of finished launches must be removed"
    assert not _zombie_children()
    # kvplan's own part of each run: the abort within 2 s of its condition, the stop within the grace + 1 s. The stop
    # is wall time of a full /proc scan, the signals and the children's exit: on a machine with more runnable work
    # than CPUs each takes its share, so the 1 s stretches by the run's contention, read here (a CI run beside other
    # work: 2.46 s for a 1 s grace)
    assert all(x is None or x <= MAX_LATENCY_S for x, _ in late), [x for x in late if x[0] and x[0] > MAX_LATENCY_S]
    slack = 1.0 * max(1.0, max(load) / (os.cpu_count() or 1))
    assert all(s <= g + slack for s, g, _ in stops), ([x for x in stops if x[0] > x[1] + slack], slack)
