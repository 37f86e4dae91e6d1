"""The simulator's KV accounting by hand arithmetic (issue 21 part 4; the real-engine check is
tests/integration/test_sim_kv_accounting.py).

* A running request holds prompt + generated tokens, in whole blocks, time-weighted: with every request of prompt P
  and output L, a request holds P + g after g of its L decode steps, so over its life P + L / 2 on average, plus
  half a block of rounding ((block - 1) / 2 on average).
* A retracted (SGLang) / preempted (vLLM V1) request keeps the tokens it generated: it is prefilled again with
  prompt + output so far (SGLang ``fill_ids = origin_input_ids + output_ids``; vLLM ``num_computed_tokens = 0``,
  recompute of ``num_tokens``) and generates only what is left, so the tokens sampled over the whole run are Σ output
  lengths. Counters read: ``Sink.cum_gen`` (output tokens sampled, all requests), ``Sink.gen_tokens`` (outputs of
  finished requests), ``Sink.prefill_tokens`` (tokens computed by prefills, recomputation included), and each
  ``Sink.admitted`` call (tokens looked up = prompt + output so far, tokens computed).
"""

from __future__ import annotations

import json

import pytest

from kvplan.cli.main import main
from kvplan.simulate.core.request import DONE
from tests.simulate.helpers import req, sglang, vllm


def test_inflight_tokens_are_prompt_plus_half_the_output(capsys):
    # 10 clients, each request P = 100, L = 4,000 on an H100 (Qwen3-8B: ~409k tokens, nothing preempted): a running
    # request holds 100 + 4,000 / 2 = 2,100 tokens on average, in 16-token blocks: + 7.5 -> ~2,107.5
    code = main(["simulate", "--json", "--prompt-len", "100", "--output-len", "4000", "--concurrency", "10",
                 "--requests", "200", "--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen3-8B"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["completed"] == 200
    block = d["launch"]["knobs"]["block_size"]
    assert block == 16 and d["scheduler"]["preempted_requests"] == 0
    hand = 100 + 4000 / 2 + (block - 1) / 2
    load = d["load"]
    assert load["inflight_tokens_per_request"] == pytest.approx(hand, rel=0.02)
    # the usage is the same counter: running × tokens per request / pool (~0.052; the old accounting: 110.6 tokens
    # per request, usage 0.0027)
    assert load["kv_usage_mean"] == pytest.approx(
        load["running_mean"] * load["inflight_tokens_per_request"] / d["launch"]["kv_tokens_per_instance"],
        rel=0.02)
    assert load["running_mean"] == pytest.approx(10, rel=0.02)


def test_the_issues_command_without_requests(capsys):
    # issue 21's command as written (no --requests): 10 requests per client of --concurrency 10 = 100, the same
    # ~2,107.5 tokens per running request as above
    code = main(["simulate", "--json", "--prompt-len", "100", "--output-len", "4000", "--concurrency", "10",
                 "--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen3-8B"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["workload"]["requests"] == 100 and d["completed"] == 100
    assert d["load"]["inflight_tokens_per_request"] == pytest.approx(100 + 4000 / 2 + 15 / 2, rel=0.02)


def _drain(inst, reqs, limit: int = 10_000):
    """Run the scheduler until every request finished (all queued at t = 0); record each admission as (rid, output
    so far, tokens looked up, tokens computed)."""
    adm = []
    admitted = inst.sink.admitted

    def spy(r, t, looked_up, cached, host, computed):
        adm.append((r.rid, r.gen, looked_up, computed))
        admitted(r, t, looked_up, cached, host, computed)

    inst.sink.admitted = spy
    inst.waiting.extend(reqs)
    done: list = []
    for _ in range(limit):
        if len(done) == len(reqs):
            break
        inst.schedule()
        for r in inst.fire():
            inst.sink.finished(r, inst.t)  # what the cluster does with a finished request
            done.append(r)
    assert len(done) == len(reqs), f"not drained: {reqs}"
    return adm


# With prefix caching, B's surviving first block depends on when A's new blocks evict B's cached ones: vLLM's
# allocate_slots evicts each block as A takes it, before A's own finish frees anything (the simulator settles the cache
# at the end of each decode span, before its finishers are released: Instance._advance).
@pytest.mark.parametrize("prefix_caching,cached", [(False, 0), (True, 16)])
def test_vllm_preempted_request_recomputes_prompt_and_output(prefix_caching, cached):
    # Pool 10 blocks of 16 (160 tokens); A and B: prompt 40, output 100. Both admitted (3 blocks each), prefilled
    # (gen 1, KV 40), decode in lock step; a request with KV k needs a new block when k % 16 == 0: at k = 80
    # (gen = 80 - 40 + 1 = 41) each holds 5 blocks and wants a 6th, none free: B (admitted last) is preempted with
    # 41 generated tokens. It cannot come back before A finishes (6 blocks for 81 tokens > 4 free), then it
    # recomputes 40 + 41 = 81 tokens (fill = num_tokens), minus what survived in the prefix cache: B left 5 full
    # blocks; A's 4 new blocks (6th-9th: KV up to 40 + 99 - 1 = 138) take 4 of them, the last blocks first, so its
    # first block (16 tokens) survives. B then generates 100 - 41 = 59 tokens (the first by the recompute's forward).
    inst = vllm(10 * 16, block=16, prefix_caching=prefix_caching)
    a, b = req(1, 40, 100), req(2, 40, 100)
    adm = _drain(inst, [a, b])
    s = inst.sink
    assert s.preemptions == 1 and s.preempt_events == 1 and (a.retracts, b.retracts) == (0, 1)
    assert adm == [(1, 0, 40, 40), (2, 0, 40, 40), (2, 41, 81, 81 - cached)]
    assert s.prefill_tokens == 40 + 40 + 81 - cached
    assert s.cum_gen == s.gen_tokens == 200  # Σ outputs: nothing generated twice
    assert a.gen == b.gen == 100 and a.state == b.state == DONE


def test_sglang_retracted_request_refills_prompt_and_output():
    # Pool 300 tokens (page 1), radix cache off (nothing survives a retraction), the max_new estimate clipped to 50
    # (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION) so both are admitted at once: 60 + 50 = 110 < 300, then 40 + 50 = 90 <
    # 300 - 110. A: prompt 60, B: prompt 40, both output 150. After the prefill (gen 1) they hold 60 + 40 = 100;
    # each decode step needs 2 tokens: 200 free -> 100 steps (gen 101, KV 160 + 140 = 300). The next step does not
    # fit: retract_decode takes the fewest outputs, ties to the longest prompt: A, with 101 tokens generated. A's
    # refill, 60 + 101 = 161 tokens + min(49 left, 50), does not fit beside B; B finishes, A is prefilled again with
    # 161 tokens and generates the remaining 49.
    inst = sglang(300, page=1, radix_cache=False, clip_max_new_tokens=50)
    a, b = req(1, 60, 150), req(2, 40, 150)
    adm = _drain(inst, [a, b])
    s = inst.sink
    assert s.preemptions == 1 and (a.retracts, b.retracts) == (1, 0)
    assert adm == [(1, 0, 60, 60), (2, 0, 40, 40), (1, 101, 161, 161)]
    assert s.prefill_tokens == 60 + 40 + 161
    assert s.cum_gen == s.gen_tokens == 300
    assert a.gen == b.gen == 150 and a.state == b.state == DONE
