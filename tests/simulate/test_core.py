"""The closed forms of the decoding batch and the step model against brute force, step by step."""

from __future__ import annotations

import random

import pytest

from kvplan.simulate.core.cache import PrefixCache
from kvplan.simulate.core.decode import DecodeSet
from kvplan.simulate.core.metrics import LogHistogram, TimeSeries
from kvplan.simulate.core.request import Req
from kvplan.simulate.steptime.model import StepModel
from kvplan.simulate.steptime.roofline import Roofline


@pytest.mark.parametrize("page", [1, 16, 64])
def test_decode_set_pages_and_shortage_match_a_token_by_token_walk(page):
    rnd = random.Random(page)
    d = DecodeSet(page)
    step = 7
    rs = []
    for i in range(40):
        r = Req(i, 0.0, rnd.randint(1, 3000), rnd.randint(1, 9000))
        r.gen = rnd.randint(1, 200)
        d.add(r, step)
        rs.append(r)

    def kv(r, s):  # KV held before the next decode step: prompt + gen - 1, gen = s - birth
        return r.prompt + (s - r.birth) - 1

    for s in range(step, step + 500, 37):
        assert d.pages(s) == sum(-(-kv(r, s) // page) for r in rs)
        assert d.kv_tokens(s) == sum(r.prompt + s - r.birth for r in rs)
        free = rnd.randint(0, 3 * len(rs))
        used = k = 0
        while True:  # a page is allocated by every member whose KV length is a multiple of the page
            need = sum(1 for r in rs if kv(r, s + k) % page == 0)
            if used + need > free:
                break
            used, k = used + need, k + 1
        assert d.steps_until_short(s, free) == k
        assert d.pages_needed_next(s) == sum(1 for r in rs if kv(r, s) % page == 0)
    out = rs.pop(5)
    d.remove(out, step + 100)
    assert d.pages(step + 100) == sum(-(-kv(r, step + 100) // page) for r in rs)
    assert d.next_finish() == min(r.birth + r.output for r in rs)


def test_step_model_span_is_the_sum_of_its_steps():
    roof = Roofline(weights_bytes=7 * 10**10, expert_fraction=0.95, n_experts=384, experts_per_token=8,
                    kv_bytes_per_token=70_272, active_params_per_token=4e9, mem_bw_gbps=1792, dense_tflops=503.8)
    m = StepModel(roof, (0.004, 1.2, 0.9, 0.5, 0.002, 0.0001))
    b, kv0 = 50, 100_000
    per_step = [m.step(b, kv0 + i * b) for i in range(300)]
    assert m.span(b, kv0, 300) == pytest.approx(sum(per_step), rel=1e-12)
    n = m.steps_within(b, kv0, sum(per_step[:123]) + 1e-9)
    assert n == 123


def test_roofline_touched_experts_by_hand():
    # 1 - (1 - 8/384)^50 = 0.6502 of the routed experts are read by a 50-token step
    roof = Roofline(weights_bytes=10**11, expert_fraction=0.9, n_experts=384, experts_per_token=8,
                    kv_bytes_per_token=1, active_params_per_token=1, mem_bw_gbps=1000, dense_tflops=1)
    assert roof.touched(50) == pytest.approx(1 - (1 - 8 / 384) ** 50)
    assert roof.weight_s(50) == pytest.approx((10**10 + 9 * 10**10 * (1 - (376 / 384) ** 50)) / 1e12)
    g8 = Roofline(**{**roof.__dict__, "lockstep_groups": 8})
    assert g8.touched(10) == pytest.approx(roof.touched(80))


def test_log_histogram_quantiles_within_one_percent():
    rnd = random.Random(1)
    xs = [rnd.lognormvariate(0, 1.5) for _ in range(20_000)]
    h = LogHistogram()
    for x in xs:
        h.add(x)
    xs.sort()
    for q in (0.5, 0.9, 0.99):
        exact = xs[int(q * (len(xs) - 1))]
        assert h.quantile(q) == pytest.approx(exact, rel=0.011)
    assert len(h.bins) < 2000


def test_time_series_stays_bounded_and_keeps_totals():
    ts = TimeSeries(1.0, limit=100)
    total = 0.0
    for i in range(10_000):
        ts.occupancy(i * 3.0, i * 3.0 + 3.0, 10, 5, 0.5)
        ts.tokens(i * 3.0, i * 3.0 + 3.0, 30.0)
        total += 30.0
    assert len(ts.buckets) <= 101
    pts = ts.points()
    assert sum(p["gen_tps"] for p in pts) * ts.w == pytest.approx(total, rel=1e-4)
    assert all(p["running"] == pytest.approx(10) for p in pts)


def test_cache_whole_leaf_vs_partial_eviction_and_host_tier():
    sg = PrefixCache(page=1, whole_leaf=True, host_tokens=200)
    sg.insert(("r", 1), 60, 1.0, locked=False)
    sg.insert(("r", 2), 50, 2.0, locked=False)
    assert sg.evictable_pages == 110 and sg.host_write_tokens == 110  # write_through: every insert is backed up
    assert sg.evict(10, 3.0) == 60  # the least recently used leaf goes whole
    assert sg.match(("r", 1)) == (0, 60)  # ...and its host copy remains: a later match loads it back
    sg.insert(("r", 3), 150, 4.0, locked=False)  # the host pool (200) evicts its least recently used copy whole
    assert sg.match(("r", 1)) == (0, 0) and sg.host_used == 200
    vl = PrefixCache(page=16, whole_leaf=False)
    vl.insert(("r", 1), 64, 1.0, locked=False)
    assert vl.evict(1, 2.0) == 1 and vl.match(("r", 1)) == (48, 0)  # vLLM: the last block goes, the prefix stays
