"""Memory stays flat in the number of requests, the work is linear in it, and the results converge.

Ground truth here is the invariants: a closed loop of 150 clients never has more than 150 requests alive, so the
peak memory of 10× the requests is the same; the events per request are the same; and every request finishes.
"""

from __future__ import annotations

import tracemalloc

import pytest

from kvplan.simulate.run import run_simulation
from kvplan.simulate.session import prepare
from kvplan.simulate.workload.generate import generated
from tests.diagnose.incident_log import CMD

HW = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "host_mem_gib": 449.0, "engine_version": "0.5.9"}


@pytest.fixture(scope="module")
def launch():
    ses = prepare(CMD, HW, None, mem_bw_gbps=1792.0, tflops=503.8)
    return ses.inputs, ses.model_for(ses.inputs)


def _run(launch, n: int):
    inputs, model = launch
    w = generated(n, 1000, 4000, concurrency=150, prompt_dist="uniform:0.5", output_dist="uniform:0.5", seed=2)
    tracemalloc.start()
    res = run_simulation(inputs, w, model)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return res, peak


def test_ten_times_the_requests_same_memory_same_work_per_request(launch):
    _run(launch, 300)  # imports and caches of the first run are not the job's
    small, p1 = _run(launch, 600)
    big, p10 = _run(launch, 6_000)
    print(f"peak {p1 / 2**20:.2f} MiB -> {p10 / 2**20:.2f} MiB, events {small.sim['events']} -> {big.sim['events']}")
    assert small.completed == 600 and big.completed == 6_000
    assert p10 < 1.25 * p1 + 256 * 1024  # the series and histograms fill up to their fixed sizes
    assert big.sim["events"] / 6_000 == pytest.approx(small.sim["events"] / 600, rel=0.1)
    assert big.steady_gen_tps == pytest.approx(small.steady_gen_tps, rel=0.08)
    assert len(big.series) <= 401
