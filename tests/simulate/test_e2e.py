"""Whole runs through the cluster loop: a timeline computed by hand, conservation of tokens and requests, the
router, and a heavily preempting vLLM launch planned by ``check``."""

from __future__ import annotations

import pytest

from kvplan.simulate.core.cluster import Cluster
from kvplan.simulate.core.sink import Sink
from kvplan.simulate.run import run_simulation
from kvplan.simulate.session import prepare
from kvplan.simulate.workload.generate import generated
from tests.simulate import helpers


@pytest.mark.parametrize("make", [helpers.sglang, helpers.vllm])
def test_timeline_by_hand(make):
    # 4 clients, 8 requests of 10 + 101 tokens, every forward 10 ms, room for all: the first four are prefilled
    # together (10 ms, token 1), decode 100 steps (1.00 s) and finish at 1.01 s; the next four arrive then and
    # finish at 2.02 s. TTFT 10 ms, TPOT (1.01 - 0.01) / 100 = 10 ms, end to end 1.01 s.
    inst = make(100_000)
    sink = Sink(total_requests=8)
    inst.sink = sink
    Cluster([[inst]], sink, generated(8, 10, 101, concurrency=4)).run()
    inst.flush()
    assert sink.done == 8 and sink.gen_tokens == 808
    assert sink.last_t == pytest.approx(2.02)
    assert sink.ttft.quantile(0.5) == pytest.approx(0.01, rel=0.01)
    assert sink.tpot.quantile(0.99) == pytest.approx(0.01, rel=0.01)
    e2e = sink.e2e.summary()
    assert e2e["max"] == pytest.approx(1.01) and e2e["mean"] == pytest.approx(1.01)
    # SGLang's #running-req counts the decoding batch: four at every instant but the two prefills (4 × 2.00); vLLM's
    # running list holds a request from its admission, prefill included (num_requests_running: 4 × 2.02)
    assert sink.running_area == pytest.approx(4 * (2.00 if make is helpers.sglang else 2.02))


@pytest.mark.parametrize("make", [helpers.sglang, helpers.vllm])
def test_tight_pool_conserves_requests_and_tokens(make):
    # 6,000 tokens for 40 clients of 300 + ~700 tokens: retraction / preemption all the time
    inst = make(6000)
    sink = Sink(total_requests=500)
    inst.sink = sink
    w = generated(500, 300, 700, concurrency=40, prompt_dist="uniform:0.5", output_dist="exp", seed=4)
    Cluster([[inst]], sink, w).run()
    outs = sum(it.output for it in w.stream())
    assert sink.done == 500 and sink.aborted == 0 and sink.gen_tokens == outs
    assert sink.preemptions > 0
    assert sink.prefill_tokens >= sum(it.prompt for it in w.stream())  # recomputation only adds
    assert inst.dec.B == 0 and not inst.waiting and inst.aux_pages == 0 and inst.cache.locked_pages == 0


def test_least_load_router_balances_replicas():
    a, b = helpers.sglang(100_000), helpers.sglang(100_000, step_s=0.03)  # b is three times slower
    sink = Sink(instances=2, total_requests=300)
    a.sink = b.sink = sink
    c = Cluster([[a], [b]], sink, generated(300, 50, 200, concurrency=8), router="least-load")
    c.run()
    assert sink.done == 300
    served = c.rid  # requests issued
    assert served == 300
    rr = Cluster([[helpers.sglang(100_000)], [helpers.sglang(100_000, step_s=0.03)]], Sink(2, total_requests=300),
                 generated(300, 50, 200, concurrency=8))
    for inst in rr.instances:
        inst.sink = rr.sink
    rr.run()
    assert sink.last_t < rr.sink.last_t  # least-load sends more to the fast replica: the job ends sooner


def test_vllm_launch_planned_by_check_under_heavy_preemption():
    cmd = ("vllm serve Qwen/Qwen3-8B --kv-cache-memory-bytes 2G --max-num-seqs 128 "
           "--max-model-len 8192")
    ses = prepare(cmd, {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "host_mem_gib": 256.0},
                  mem_bw_gbps=1792.0, tflops=503.8)
    assert ses.inputs.engine == "vllm" and ses.inputs.knobs.block_size == 16
    w = generated(1500, 1500, 1500, concurrency=64, prompt_dist="uniform:0.5", output_dist="exp", seed=5)
    res = run_simulation(ses.inputs, w, ses.model_for(ses.inputs))
    assert res.completed == 1500 and res.preempted_requests > 0
    assert res.prefix_hit_rate is not None and res.prefix_hit_rate > 0  # resumed requests find their blocks
    assert 0 < res.running_mean <= 64
