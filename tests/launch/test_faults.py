"""Fault programs under ``kvplan launch``, with real processes: each ends with the right abort reason, within 2 s
of crossing its limit, exit code 3, and nothing left in /proc or /dev/shm.

Latencies are read on the clocks of the processes involved, never the test's: the fault's own CLOCK_MONOTONIC stamp
of the crossing, and kvplan's abort event (its ``t`` from the launch, placed on CLOCK_MONOTONIC no earlier than it
happened: Run.at). The test's wall clock, which a loaded machine stretches with interpreter start-ups and the stop,
is not read."""

from __future__ import annotations

import re
import signal

import pytest

from kvplan.launch.watchdog import meminfo
from tests.launch.helpers import fault, launch, left_behind
from tests.waits import reserved_port

BUDGET = ["--host-budget-gib", "0.3"]
MAX_LATENCY_S = 2.0


def _aborted(run, reason: str) -> dict:
    assert run.code == 3, (run.code, run.out, run.err)
    assert run.reason == reason, run.out
    assert [e["event"] for e in run.events][-2:] == ["abort", "exit"], run.events
    ex = run.event("exit")
    assert ex["by"] == "abort" and ex["left"] == [] and ex["code"] == 3, ex
    assert not left_behind(run), left_behind(run)
    assert "nothing left" in run.out
    return run.event("abort")


def test_allocates_past_the_budget(tmp_path):
    run = launch(tmp_path, BUDGET, fault("alloc_steps.py"))
    a = _aborted(run, "host-memory")
    assert a["signal"] == "host-budget" and a["phase"] == "host_pool"
    assert a["numbers"]["host_budget_bytes"] == int(0.3 * 2**30)
    crossed = run.crossed(0.3 * 1024 - 32)  # the interpreter itself holds a few MiB: cross a bit early
    if crossed is not None:  # None: the prediction stopped it before the crossing
        assert run.at("abort") - crossed <= MAX_LATENCY_S
    assert "host_pool" in run.out and "--host-budget-gib" in run.out


def test_budget_counts_workers_and_shared_memory_and_removes_the_segment(tmp_path):
    run = launch(tmp_path, BUDGET, fault("alloc_steps.py", "--workers", "2", "--shm-mib", "96", "--step-mib", "8"))
    _aborted(run, "host-memory")
    assert len(run.pids) == 3
    removed = run.event("exit")["shm_removed"]
    assert len(removed) == 1 and "psm_kvtest" in removed[0], run.events


def test_ignores_sigterm(tmp_path):
    # 3 s: the fault and its child are up and ignoring SIGTERM well before, even with the machine busy
    run = launch(tmp_path, ["--ready-timeout", "3", "--grace", "0.3"], fault("ignore_term.py"))
    _aborted(run, "ready-timeout")
    # both processes took kvplan's SIGTERM and ignored it (kvplan may send it more than once within the grace)
    ignored = {int(pid) for pid in re.findall(r"ignored SIGTERM in (\d+)", run.log)}
    assert len(run.pids) == 2 and ignored == {pid for pid, _ in run.pids}, run.log
    assert run.event("exit")["stop_s"] >= 0.3  # it took the SIGKILL after the grace
    # on kvplan's own clock (events' "t": from the spawn), so its Python start-up under a loaded machine is not counted
    assert run.event("exit")["t"] - 3 <= MAX_LATENCY_S


@pytest.mark.parametrize("clean_env", [False, True], ids=["marker", "clean-env"])
def test_double_fork_into_a_new_session(tmp_path, clean_env):
    run = launch(tmp_path, BUDGET, fault("double_fork.py", *(["--clean-env"] if clean_env else [])))
    _aborted(run, "host-memory")
    assert len(run.pids) == 2  # the parent and the grandchild, in another session
    assert "grandchild" in run.log and "sid" in run.log
    crossed = run.crossed(0.3 * 1024 - 32)
    if crossed is not None:
        assert run.at("abort") - crossed <= MAX_LATENCY_S


@pytest.mark.parametrize("how", ["exit", "killed"])
def test_worker_dies_and_stays_defunct(tmp_path, how):
    run = launch(tmp_path, [], fault("defunct_worker.py", *(["--killed"] if how == "killed" else [])))
    a = _aborted(run, "rank-died")
    assert a["signal"] == "defunct"
    died = run.stamps("illegal memory access")
    assert died and run.at("abort") - died[0] <= MAX_LATENCY_S
    assert "defunct" in run.out


def test_hangs_silently_while_memory_climbs(tmp_path):
    # 2 s of silence: longer than the interpreter's start-up on a busy machine (its memory grows before the first line)
    run = launch(tmp_path, ["--stall-timeout", "2"], fault("silent_climb.py"))
    a = _aborted(run, "stall")
    assert a["phase"] == "cuda_graphs" and a["numbers"]["grew_bytes"] >= 4 << 20
    last = run.stamps("Capture cuda graph begin")
    assert last and run.at("abort") - (last[0] + 2) <= MAX_LATENCY_S


def test_silence_with_flat_memory_is_not_a_stall(tmp_path):
    # silent for 2 s and more after its last line, memory flat: the ready timeout ends it, not a stall (2 s: longer
    # than the interpreter's start-up on a busy machine, whose growth comes before the first line)
    run = launch(tmp_path, ["--stall-timeout", "2", "--ready-timeout", "5", "--grace", "0.2"],
                 fault("ignore_term.py"))
    _aborted(run, "ready-timeout")
    assert run.event("abort")["t"] >= 5


def test_host_reserve_is_crossed(tmp_path):
    """The reserve is 400 MiB below what is available now; whatever the rest of the machine does meanwhile, the
    fault grows until MemAvailable is 256 MiB under the reserve (and holds there), so the crossing always comes."""
    _, avail = meminfo()
    reserve = avail - (400 << 20)
    run = launch(tmp_path, ["--host-reserve-gib", f"{reserve / 2**30:.3f}"],
                 fault("alloc_steps.py", "--max-mib", "6000", "--until-available-mib", str((reserve >> 20) - 256)))
    a = _aborted(run, "host-memory")
    assert a["signal"] == "host-available"
    n = a["numbers"]  # kvplan's own reading: below the reserve, or about to be at the launch's growth
    assert n["host_reserve_bytes"] == pytest.approx(reserve, abs=2 << 20)
    assert n["host_available_bytes"] < n["host_reserve_bytes"] or \
        n["host_available_bytes"] + n["host_slope_bytes_per_s"] * 0.25 < n["host_reserve_bytes"]


def test_exit_code_of_a_server_that_exits_by_itself(tmp_path):
    run = launch(tmp_path, [], ["python3", "-c", "import sys; print('bye'); sys.exit(7)"])
    assert run.code == 7 and run.event("exit")["by"] == "server" and run.reason is None
    run = launch(tmp_path, [], ["python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert run.code == 128 + 9


def test_leftovers_of_a_server_that_exits_are_stopped(tmp_path):
    """The server exits by itself but its double-forked grandchild lives on: kvplan stops it and keeps the code."""
    code = ("import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        time.sleep(30)\n    os._exit(0)\ntime.sleep(0.5)\nsys.exit(5)\n")
    run = launch(tmp_path, [], ["python3", "-c", code])
    assert run.code == 5 and run.event("exit")["killed"] == 1 and run.event("exit")["left"] == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stop_on_request_is_clean(tmp_path, sig):
    run = launch(tmp_path, ["--stop-grace", "0.3"], fault("ignore_term.py"), signals=[("Load weight begin", sig)])
    assert run.code == 0, run.out
    ex = run.event("exit")
    assert ex["by"] == "request" and ex["left"] == [] and run.reason is None
    assert not left_behind(run)


def test_second_signal_skips_the_grace(tmp_path):
    # the second SIGTERM once kvplan is in its grace: the server has logged that it ignored kvplan's SIGTERM
    run = launch(tmp_path, ["--stop-grace", "30"], fault("ignore_term.py"),
                 signals=[("Load weight begin", signal.SIGTERM), ("ignored SIGTERM", signal.SIGTERM)])
    # the 30 s grace was skipped: kvplan's own clock (from the spawn) ends far below it, whatever the machine's load
    assert run.code == 0 and run.event("exit")["t"] < 10
    assert not left_behind(run)


def test_ready_over_http_then_memory_still_watched(tmp_path):
    with reserved_port() as port:  # held until the fault's server (SO_REUSEADDR) has bound it and the run is over
        run = launch(tmp_path, [*BUDGET, "--health-url", f"http://127.0.0.1:{port}/health"],
                     fault("http_ready.py", "--port", str(port), "--alloc-after-ready", "8"))
    a = _aborted(run, "host-memory")
    ready = run.event("ready")
    assert ready and ready["via"] == "http" and ready["t"] < a["t"]
    assert run.phases()[-1] == "ready" and a["phase"] == "ready"
