"""The kv-capacity rule at its edges, on windows made by hand (three vLLM stats lines 10 s apart, the minimum that
names a bottleneck): each window's numbers sit on one side of one threshold of the rule (mean usage 0.85, peak
0.90, one request queued, two running at the edge, preemptions with nothing queued), so moving a threshold or
loosening a comparison changes the answer."""

from __future__ import annotations

import pytest

from kvplan.diagnose.rules import RuleContext, classify, kv_capacity
from kvplan.diagnose.stats import Sample, parse_samples
from kvplan.diagnose.window import build


def _win(*rows: dict):
    return build([Sample(kind="stats", fmt="vllm-v1", t=10.0 * i, **r) for i, r in enumerate(rows)], "vllm")


def _kv(w):
    return kv_capacity.check(RuleContext(w, "vllm"))


def _first(w) -> str:
    return classify(RuleContext(w, "vllm"))[0].id


@pytest.mark.parametrize("usage, named", [(0.84, False), (0.85, True), (0.86, True)])
def test_a_queue_with_the_mean_usage_around_085(usage, named):
    # 1 waits while 20 run; peak = mean < 0.90; the free part (1 - u) holds several requests of u / 20 each, so only
    # the mean usage >= 0.85 can name the pool
    w = _win(*[dict(running=20, queued=1, usage=usage)] * 3)
    assert w.usage == pytest.approx(usage) and w.usage_max < 0.90 and w.queued == 1
    v = _kv(w)
    assert (v is not None) == named
    if named:
        assert v.cause == "requests wait because the KV pool is full" and _first(w) == "kv-capacity"
        assert f"KV pool usage {usage:.2f}" in v.evidence[0]
    else:
        assert _first(w) != "kv-capacity"


def test_a_peak_of_090_names_the_pool_with_a_lower_mean():
    # usage 0.80, 0.80, 0.90: mean 0.833 < 0.85 but peak 0.90 >= 0.90, one queued on average
    w = _win(*[dict(running=20, queued=1, usage=u) for u in (0.80, 0.80, 0.90)])
    assert w.usage == pytest.approx(0.8333, abs=1e-3) and w.usage_max == pytest.approx(0.90)
    assert _kv(w) is not None and _first(w) == "kv-capacity"
    w = _win(*[dict(running=20, queued=1, usage=u) for u in (0.80, 0.80, 0.89)])  # peak 0.89: not full
    assert _kv(w) is None


@pytest.mark.parametrize("queued, named", [(0, False), (1, True)])
def test_one_queued_request_is_a_queue(queued, named):
    # usage 0.86 with 20 running: full by the mean; nothing else in the window (no preemption, mean 0.86 < 0.90 edge)
    w = _win(*[dict(running=20, queued=queued, usage=0.86)] * 3)
    assert w.queued == queued
    assert (_kv(w) is not None) == named


@pytest.mark.parametrize("running, named", [(1, False), (2, True)])
def test_the_edge_needs_two_running(running, named):
    # nothing waits, usage 0.91 >= 0.90: with two running each holds 0.455 and the free 0.09 cannot hold another (the
    # running requests grow into it); a single request at 0.91 is just one long request, not the edge
    w = _win(*[dict(running=running, queued=0, usage=0.91)] * 3)
    v = _kv(w)
    assert (v is not None) == named
    if named:
        assert v.cause.startswith("the KV pool is at its edge") and "free pool 9% vs 46%" in v.evidence[1]


def test_vllm_preemptions_with_nothing_queued_name_the_pool():
    # vLLM V1 stats lines: 3 preemptions in the last interval, nothing waits, usage 0.50: the engine evicted running
    # requests, so the pool is the limit whatever the queue and the usage say
    lines = [f"INFO 11-29 09:10:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
             f"generation throughput: 300.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, Preemptions: {p}, GPU KV "
             "cache usage: 50.0%, Prefix cache hit rate: 0.0%" for s, p in ((0, 0), (10, 0), (20, 3))]
    w = build(parse_samples(lines), "vllm")
    assert w.preemptions == 3 and w.queued == 0 and w.usage == pytest.approx(0.50)
    v = _kv(w)
    assert v is not None and v.evidence[0].startswith("3 preemption(s) in the window")
    ids = [x.id for x in classify(RuleContext(w, "vllm"))]
    assert ids[0] == "kv-capacity" and "client-bound" not in ids  # preemptions rule out a client that sends too little


def test_the_same_window_without_preemptions_is_client_bound():
    w = _win(*[dict(running=8, queued=0, usage=0.50)] * 3)
    assert _kv(w) is None and _first(w) == "client-bound"
