"""SGLang's scheduler rules, each against arithmetic done by hand from the engine's source (0.5.9):
schedule_policy.py::PrefillAdder (admission), schedule_batch.py::retract_decode (retraction), scheduler.py
(new_token_ratio init/decay, batch_is_full)."""

from __future__ import annotations

import pytest

from kvplan.simulate.core.request import RUNNING, WAITING
from tests.simulate.helpers import req, sglang


def _admit(inst, *reqs):
    for r in reqs:
        inst.waiting.append(r)
    inst.schedule()
    return [r for r, _, _ in inst.batch]


def test_admission_reserves_prompt_plus_max_new_then_stops_with_no_token():
    # pool 10,000; each request needs extend 1000 + min(max_new 3000, CLIP 4096) = 4000 < rem_total
    # rem_total: 10,000 -> 6,000 -> 2,000; the third (4,000 >= 2,000) is NO_TOKEN and latches batch_is_full
    inst = sglang(10_000)
    a, b, c = req(1, 1000, 3000), req(2, 1000, 3000), req(3, 1000, 3000)
    assert _admit(inst, a, b, c) == [a, b]
    assert inst.full and list(inst.waiting) == [c]
    assert inst.aux_pages == 2000  # their prompts' KV is allocated with the prefill


def test_running_requests_reserve_ratio_times_remaining():
    # after the prefill both run with gen=1: reserved = 0.7 × 2 × (3000 - 1) = 4198.6
    inst = sglang(10_000)
    a, b = req(1, 1000, 3000), req(2, 1000, 3000)
    _admit(inst, a, b)
    inst.fire()
    assert a.state == RUNNING and a.gen == 1
    assert inst._reserved() == pytest.approx(0.7 * 2 * 2999)
    inst.full = False  # a new candidate: 1000 + 3000 = 4000 vs 10,000 - 2000 held - 4198.6 = 3801.4: NO_TOKEN
    d = req(4, 1000, 3000)
    assert _admit(inst, d) == []
    assert inst.full and d.state == WAITING


def test_ratio_decays_per_decode_step_to_its_floor():
    # init 0.7, min 0.7 × 0.14 = 0.098, decay (0.7 - 0.098) / 600 per decode step
    inst = sglang(100_000)
    inst.on_decode_steps(100)
    assert inst.ratio == pytest.approx(0.7 - 100 * (0.7 - 0.098) / 600)
    inst.on_decode_steps(10_000)
    assert inst.ratio == pytest.approx(0.098)


def test_conservativeness_scales_the_initial_ratio():
    inst = sglang(100_000, schedule_conservativeness=1.3)
    assert inst.ratio == pytest.approx(0.91)  # min(0.7 × 1.3, 1)


def test_retraction_takes_fewest_outputs_longest_prompt_and_resets_the_ratio():
    # A: P=1000 gen=500 (KV 1499), B: P=1000 gen=100 (KV 1099), C: P=200 gen=100 (KV 299): 2897 held, pool 2899,
    # next step needs 3 -> retract. Order (len(output_ids), -len(origin_input_ids)) descending, pop from the end:
    # B and C tie on outputs, B has the longer prompt -> B goes; then 2 free + B's 1099 freed (its prompt stays
    # evictable in the tree) >= 2: stop. ratio = (500 + 100 + 20 × 2) / (2000 + 300 + 1)
    inst = sglang(2899)
    a, b, c = req(1, 1000, 2000), req(2, 1000, 2000), req(3, 200, 300)
    for r, g in ((a, 500), (b, 100), (c, 100)):
        r.gen, r.computed = g, r.prompt
        inst._join(r)
    assert inst.free_pages() == 2
    inst._retract()
    assert list(inst.waiting) == [b] and b.state == WAITING and b.retracts == 1 and b.gen == 100
    assert inst.dec.members == {a, c}
    assert inst.ratio == pytest.approx((600 + 40) / 2301)
    assert inst.cache.evictable_pages == 1000  # B's prompt, not its output


@pytest.mark.parametrize("version,retracted", [("0.5.2", [3]), ("0.5.9", [3]), ("0.5.1", [3, 2]),
                                               ("0.4.6", [3, 2])])
def test_retraction_target_by_version(version, retracted):
    # A: P=1000 gen=500 (KV 1499), B: P=600 gen=200 (KV 799), C: P=10 gen=5 (KV 14): 2312 held in a pool of 2314;
    # the next step needs 3. C goes first (fewest outputs): 2 + 14 = 16 free. 0.5.2+ (check_decode_mem) needs 2:
    # stop. Up to 0.5.1 (get_required_tokens) the 2 remaining need 2 × 20 = 40 > 16: B goes too (816 >= 20).
    inst = sglang(2314, version=version)
    a, b, c = req(1, 1000, 2000), req(2, 600, 2000), req(3, 10, 300)
    for r, g in ((a, 500), (b, 200), (c, 5)):
        r.gen, r.computed = g, r.prompt
        inst._join(r)
    assert inst.free_pages() == 2 and inst.dec.pages_needed_next(inst.step) == 3
    inst._retract()
    assert [r.rid for r in inst.waiting] == retracted


def test_chunked_prefill_splits_a_long_prompt_into_chunks():
    # P = 10,000, chunked_prefill_size 4096: chunks 4096, 4096, 1808; decode starts after the last
    inst = sglang(100_000, chunk=4096)
    r = req(1, 10_000, 10)
    inst.waiting.append(r)
    sizes = []
    for _ in range(3):
        inst.schedule()
        sizes.append(sum(ext for _, ext, _ in inst.batch))
        inst.fire()
    assert sizes == [4096, 4096, 1808]
    assert r.state == RUNNING and r.gen == 1 and r.computed == 10_000


def test_prefill_batch_is_capped_by_max_prefill_tokens():
    # max_prefill_tokens 16384: 1st 6000 (rem 10384), 2nd 6000 (rem 4384), 3rd: 6000 >= 4384 with a non-empty
    # batch -> OTHER (no latch)
    inst = sglang(1_000_000, chunk=None)
    rs = [req(i, 6000, 10) for i in range(3)]
    assert _admit(inst, *rs) == rs[:2]
    assert not inst.full


def test_max_running_requests_latches_the_batch():
    inst = sglang(1_000_000, max_running=2)
    rs = [req(i, 100, 10) for i in range(3)]
    assert _admit(inst, *rs) == rs[:2]
    assert inst.full


def test_hicache_writes_through_and_loads_back_a_retracted_prompt():
    # write_through: the prompt is written to the host at prefill; after retraction and eviction from the device
    # the re-admission loads it back instead of recomputing it
    inst = sglang(100_000, host_tokens=50_000)
    r = req(1, 1000, 5000)
    _admit(inst, r)
    inst.fire()
    assert inst.cache.host_write_tokens == 1000
    inst.dec.remove(r, inst.step)
    inst._release(r, finished=False)  # as retract_decode does
    r.retracts = 1
    inst.cache.evict(inst.cache.evictable_pages, inst.t)
    assert inst.cache.match(("r", 1)) == (0, 1000)
    r.state = WAITING
    assert _admit(inst, r) == [r]
    assert r.host_hit == 1000 and r.cached == 0
    assert inst.cache.host_load_tokens == 1000
    assert [ext for _, ext, _ in inst.batch] == [1001 - 1000]  # prompt + 1 sampled token, minus the host hit


# ---- boundaries: each test's numbers sit where a one-character change of the rule flips the answer --------------
def test_admission_refuses_when_the_need_equals_the_budget_exactly():
    # PrefillAdder.add_one_req: NO_TOKEN when total >= rem_total. Pool 8,000: the first request needs
    # 1,000 + min(3,000, 4,096) = 4,000 < 8,000 and leaves 8,000 - 1,000 - 3,000 = 4,000; the second needs exactly
    # 4,000 >= 4,000: refused, batch_is_full latched (with '>' it would be admitted)
    inst = sglang(8_000)
    a, b = req(1, 1000, 3000), req(2, 1000, 3000)
    assert _admit(inst, a, b) == [a]
    assert inst.full and list(inst.waiting) == [b]


def test_admission_clips_the_remaining_output_of_a_candidate():
    # max_new 10,000 is above SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION (4,096): the candidate needs
    # 1,000 + 4,096 = 5,096 < 6,000 and is admitted (unclipped it would need 11,000 >= 6,000)
    inst = sglang(6_000)
    a = req(1, 1000, 10_000)
    assert _admit(inst, a) == [a]
    assert not inst.waiting


def test_requests_admitted_in_the_same_batch_reserve_their_clipped_max_new():
    # pool 10,000, two requests of prompt 500, max_new 10,000: the first needs 500 + 4,096 = 4,596 < 10,000 and
    # leaves 10,000 - 500 - 4,096 = 5,404; the second needs 4,596 < 5,404: both run (an unclipped reserve of
    # 10,000 would leave nothing for the second)
    inst = sglang(10_000)
    a, b = req(1, 500, 10_000), req(2, 500, 10_000)
    assert _admit(inst, a, b) == [a, b]


def test_a_running_request_reserves_its_clipped_remaining_output():
    # A (prompt 1,000, max_new 10,000) ran its prefill: gen 1, 9,999 left, clipped to 4,096; reserved
    # 0.7 x 4,096 = 2,867.2. Pool 10,000 - 1,000 held = 9,000; B (1,000 + 3,000 = 4,000) against
    # 9,000 - 2,867.2 = 6,132.8: admitted (unclipped: 9,000 - 0.7 x 9,999 = 2,000.7, refused)
    inst = sglang(10_000)
    a = req(1, 1000, 10_000)
    _admit(inst, a)
    inst.fire()
    assert a.state == RUNNING and a.gen == 1 and inst.free_pages() == 9_000
    assert inst._reserved() == pytest.approx(0.7 * 4096)
    b = req(2, 1000, 3000)
    assert _admit(inst, b) == [b]


def test_the_running_reserve_is_scaled_by_the_new_token_ratio():
    # A (prompt 1,000, max_new 3,000) runs with gen 1: 2,999 left x ratio 0.7 = 2,099.3 reserved. Pool 7,000 -
    # 1,000 held = 6,000; B needs 500 + 3,000 = 3,500 < 6,000 - 2,099.3 = 3,900.7: admitted (without the ratio:
    # 6,000 - 2,999 = 3,001 < 3,500, refused)
    inst = sglang(7_000)
    a = req(1, 1000, 3000)
    _admit(inst, a)
    inst.fire()
    assert a.state == RUNNING and inst.free_pages() == 6_000 and inst.ratio == pytest.approx(0.7)
    b = req(2, 500, 3000)
    assert _admit(inst, b) == [b]
    # and with the ratio decayed to its floor 0.098 the same pool admits a bigger one: 6,000 - 0.098 x 2,999 =
    # 5,706.1 > 1,500 + 4,096 = 5,596
    inst2 = sglang(7_000)
    a2 = req(1, 1000, 3000)
    _admit(inst2, a2)
    inst2.fire()
    inst2.on_decode_steps(10_000)
    c = req(3, 1500, 10_000)
    assert _admit(inst2, c) == [c]
