"""vLLM V1 scheduler rules against arithmetic from the engine's source (v1/core/sched/scheduler.py::schedule,
kv_cache_manager.py::allocate_slots, block_pool.py): block-granular admission of the whole sequence, LIFO
preemption by recompute, resumed requests matching the blocks of their own sequence that survived."""

from __future__ import annotations

from kvplan.simulate.core.request import PREFILLING, RUNNING, WAITING
from tests.simulate.helpers import req, vllm


def test_admission_needs_blocks_for_the_whole_prompt():
    # 64 blocks of 16; a 500-token prompt needs ceil(500 / 16) = 32 blocks: two fit, the third waits
    inst = vllm(64 * 16)
    rs = [req(i, 500, 100) for i in range(3)]
    inst.waiting.extend(rs)
    inst.schedule()
    assert [r for r, _ in inst.plan_pre] == rs[:2]
    assert inst.aux_pages == 64 and list(inst.waiting) == [rs[2]]


def test_before_the_full_sequence_gate_only_the_first_chunk_must_fit():
    # budget 768 tokens per step: 0.10-era admission allocates only what this step computes, so the second
    # request starts with a 268-token chunk (17 blocks of the 32 left); 0.20+ (scheduler_reserve_full_isl) wants
    # the whole 32 blocks of each, which also fit, but no third
    old, new = vllm(64 * 16, budget=256 * 3, version="0.10.2"), vllm(64 * 16, budget=256 * 3)
    for inst in (old, new):
        inst.waiting.extend(req(i, 500, 100) for i in range(3))
        inst.schedule()
    assert len(new.plan_pre) == 2
    assert [n for _, n in old.plan_pre] == [500, 268]  # the budget (768) runs out inside the second prompt


def test_chunked_prefill_continues_under_the_token_budget():
    inst = vllm(1000 * 16, budget=512)
    r = req(1, 1200, 10)
    inst.waiting.append(r)
    chunks = []
    while r.state != RUNNING:
        inst.schedule()
        chunks.append(sum(n for _, n in inst.plan_pre))
        inst.fire()
    assert chunks == [512, 512, 176] and r.gen == 1


def test_preemption_takes_the_last_admitted_and_puts_it_first_in_line():
    # two decoding requests whose KV sits on a block boundary (kv 32 = 2 blocks full) need a block each; 4 blocks
    # total, both hold 2: the later one is preempted (self.running.pop()), freed, and goes to the queue front
    inst = vllm(4 * 16)
    a, b, w = req(1, 30, 100), req(2, 30, 100), req(3, 10, 10)
    for r in (a, b):
        inst.waiting.append(r)
    inst.schedule()
    inst.fire()  # both prefilled (30 tokens -> 2 blocks each), gen = 1
    assert a.state == RUNNING and b.state == RUNNING and inst.free_pages() == 0
    inst.waiting.append(w)
    inst.schedule()  # next step: kv 30 -> 31 fits in block 2; no allocation yet
    inst.fire()
    inst.schedule()  # kv 31 -> 32: still within 2 blocks
    inst.fire()
    inst.schedule()  # kv 32: both need a 3rd block, none free -> preempt b
    assert b.state == WAITING and inst.waiting[0] is b and b.retracts == 1 and b.computed == 0
    assert inst.sink.preemptions == 1 and a.state == RUNNING


def test_a_preempted_request_finds_its_surviving_blocks():
    # b is preempted holding 32 tokens of KV: two full blocks are cached (evictable); a takes one of them for its
    # 3rd block (the last block of b goes first), so b's first block survives: on re-admission it matches 16
    inst = vllm(4 * 16)
    a, b = req(1, 30, 100), req(2, 30, 100)
    inst.waiting.extend([a, b])
    for _ in range(3):
        inst.schedule()
        inst.fire()
    inst.schedule()  # preempts b, a allocates its 3rd block
    assert b.state == WAITING
    assert inst.cache.match(("r", 2)) == (16, 0)
    # b wants 30 + 3 = 33 tokens: 16 hit + 17 to compute; free blocks: 4 - 3 (a) = 1 incl. b's cached one -> no.
    # a decodes on alone: at 48 tokens it needs a 4th block, and the only one left is b's cached first block, which
    # the allocation evicts then (before anything a later finish frees)
    inst.fire()
    assert a.state == RUNNING and inst.held_pages() == 4 and inst.cache.match(("r", 2)) == (0, 0)
    inst.schedule()
    assert b.state == WAITING


def test_finished_requests_free_their_blocks_and_admit_the_next():
    inst = vllm(4 * 16)
    a, w = req(1, 40, 2), req(2, 40, 2)
    inst.waiting.extend([a, w])
    inst.schedule()
    assert [r for r, _ in inst.plan_pre] == [a]  # 3 blocks each: only one fits
    done = inst.fire()
    assert not done and a.gen == 1
    inst.schedule()  # decode step 2 finishes a
    done = inst.fire()
    assert done == [a]
    inst.schedule()
    assert [r for r, _ in inst.plan_pre] == [w] and w.state == PREFILLING


def test_the_first_chunk_fits_but_the_whole_sequence_does_not():
    # 48 blocks of 16, budget 512 tokens. A (300 tokens) takes ceil(300 / 16) = 19 blocks and 300 of the budget;
    # B (500 tokens) would start with a 212-token chunk (ceil(212 / 16) = 14 blocks <= 29 free) but its whole
    # sequence needs ceil(500 / 16) = 32 > 29 blocks: 0.20+ (full_sequence_must_fit) leaves it waiting, 0.10
    # admits the chunk
    new, old = vllm(48 * 16, budget=512), vllm(48 * 16, budget=512, version="0.10.2")
    for inst in (new, old):
        inst.waiting.extend([req(1, 300, 10), req(2, 500, 10)])
        inst.schedule()
    assert [(r.rid, n) for r, n in new.plan_pre] == [(1, 300)] and [r.rid for r in new.waiting] == [2]
    assert new.aux_pages == 19
    assert [(r.rid, n) for r, n in old.plan_pre] == [(1, 300), (2, 212)] and not old.waiting
    assert old.aux_pages == 19 + 14
