"""Bottleneck classification on the logcorpus serving logs (ids the notes imply) and on synthetic windows that
trigger each rule, with the numbers in the evidence."""

from __future__ import annotations

import pytest

from kvplan.diagnose.rules import RuleContext, classify
from kvplan.diagnose.run import diagnose
from kvplan.diagnose.stats import Sample, parse_samples
from kvplan.diagnose.window import build
from tests.conftest import corpus_jsonl

# id -> bottleneck, with the note that implies it
EXPECTED = {
    "tp-vllm-6737-qwen2-0.5b-h800-v042": "kv-capacity",  # "KV pool full (99.7-100%) with ... 740+ pending"
    "tp-vllm-5578-opt125m-swap-n8": "kv-capacity",  # GPU pool fixed small, preempt by SWAP, CPU KV 70-78 %
    "tp-vllm-546-preempt-swap-v063": "kv-capacity",  # "once preempted by SWAP", 98 pending
    "tp-vllm-3094-swap-never-used": "kv-capacity",  # 3 pending at 82 % (RECOMPUTE preemption, never swapped)
    "tp-ttvllm-55-llama32-11b-vision-tenstorrent": "kv-capacity",  # "KV fills toward 100% with 16 running"
    "tp-vllm-4760-functionary-small-3090": "client-bound",  # "an idle period"
    "tp-vllm-wtdcode42-qwen38-flashnext-awq-4xa100": "client-bound",  # "Single-user ... KV nearly empty"
    "tp-club3090-613-qwen27b-nvfp4-5090": "client-bound",  # "Single-stream"
    "tp-club3090-105-qwen36-27b-autoround-2x3090": "client-bound",  # "single stream"
    "tp-vllm-syvai68-qwen38-27b-2x3060": "client-bound",  # 1 running, 0 waiting
    "tp-sglang-docs-llama31-8b-80gb-v041": "client-bound",  # "Single-stream bf16 8B decode"
    "tp-sglang-pr22331-hisparse": "client-bound",
    "tp-sglang-pr22166-fusedsampling": "client-bound",
    "tp-sglangjax-564-dsv2-lite-tpu": "client-bound",
    "tp-sglang-4759-specdec-h20-3e": "compute-bound",  # "Speculative decoding lowers throughput at 32 concurrency"
    "tp-vllm-19680-v1-prefix": "compute-bound",  # 4 wait at 58 % usage while prompts are being computed
    "tp-vllm-pr6317-llama3-70b-gh200-cpuoffload": "unknown",  # a throughput figure only
    "tp-qwen3vl-1378-qwen25-vl-7b-a100-v091": "unknown",  # throughputs only (preprocessing-bound per the notes)
}
CASES = {c["id"]: c for c in corpus_jsonl("throughput.jsonl")}


# Excerpts that show enough to name a bottleneck (issue #12: at least 3 samples over at least 10 s, or the engine's
# own preemption events): 6737 has five stats lines over 20 s; 546 and 5578 print "preempted by PreemptionMode.SWAP".
# Every other excerpt has 1-2 stats lines (or 3 within 1 s): its bottleneck is "unknown", what it leans to (the
# label above) is kept as secondary.
NAMED = {"tp-vllm-6737-qwen2-0.5b-h800-v042", "tp-vllm-546-preempt-swap-v063", "tp-vllm-5578-opt125m-swap-n8"}


@pytest.mark.parametrize("case_id", sorted(EXPECTED))
def test_corpus_bottleneck(case_id, corpus):
    res = diagnose(log=str(corpus / CASES[case_id]["raw_file"]))
    d = res.to_dict()
    if case_id in NAMED or EXPECTED[case_id] == "unknown":
        assert res.bottleneck == EXPECTED[case_id], d["evidence"]
    else:
        assert res.bottleneck == "unknown" and "need ≥ 3 samples over ≥ 10 s" in d["cause"], d["evidence"]
        assert d["secondary"] and d["secondary"][0]["id"] == EXPECTED[case_id]  # what the thin window leans to
    assert d["evidence"] and all(isinstance(e, str) and e for e in d["evidence"])
    if d["bottleneck"] not in ("unknown",):
        assert any(ch.isdigit() for e in d["evidence"] for ch in e)  # evidence carries numbers
    assert d["levers"] == [] or d["levers"][0]["name"] == "current"


def test_every_corpus_case_is_covered(corpus):
    assert set(EXPECTED) == set(CASES)


def _win(rows: list[dict], engine: str = "vllm"):
    # one stats line every 10 s, as vLLM prints them (VLLM_LOG_STATS_INTERVAL)
    return build([Sample(kind="stats", fmt="vllm-v1", t=10.0 * i, **r) for i, r in enumerate(rows)], engine)


def _ids(w, **kw) -> list[str]:
    return [v.id for v in classify(RuleContext(w, w.engine, **kw))]


def test_host_tier_when_the_host_pool_is_full():
    w = _win([dict(running=10, queued=5, usage=0.99, host_usage=0.97, swapped=40)] * 3)
    ids = _ids(w)
    assert ids[0] == "host-tier" and "kv-capacity" in ids


def test_prefix_miss_when_hits_collapse_under_a_full_pool():
    rows = [dict(running=20, queued=0, usage=0.9, prefix_hit=h, gen_tps=100.0, prompt_tps=3000.0)
            for h in (0.7, 0.68, 0.6, 0.4, 0.3, 0.25)]
    v = classify(RuleContext(_win(rows), "vllm"))[0]
    assert v.id == "prefix-miss" and "69%" in v.evidence[0] and "28%" in v.evidence[0]


def test_running_cap_when_the_engine_cap_holds_the_queue():
    w = _win([dict(running=256, queued=400, usage=0.40, gen_tps=3000.0)] * 3)
    assert _ids(w, max_running=256)[0] == "running-cap"
    assert _ids(w)[0] == "compute-bound"  # cap unknown: requests wait while the pool has room


def test_compute_bound_when_the_per_request_rate_falls_with_the_batch():
    rows = [dict(running=n, queued=0, usage=0.3, gen_tps=n * (40.0 - n / 4)) for n in (8, 16, 32, 48, 64)]
    v = classify(RuleContext(_win(rows), "vllm"))[0]
    assert v.id == "compute-bound" and "per-request generation falls" in v.evidence[0]


def test_kv_capacity_from_sglang_retractions():
    lines = [f"[2026-01-01 00:00:0{i} TP0] Decode batch, #running-req: 30, #token: 9000, token usage: 0.70, cuda "
             "graph: True, gen throughput (token/s): 300.00, #queue-req: 0" for i in range(5)]
    lines.append("[2026-01-01 00:00:06 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, "
                 "#new_tokens_gained: 800, #new_token_ratio: 0.4 -> 0.8")
    w = build(parse_samples(lines), "sglang")
    v = classify(RuleContext(w, "sglang"))[0]
    assert v.id == "kv-capacity" and "2 request(s) retracted" in v.evidence[0]


def test_unknown_without_samples_says_why():
    v = classify(RuleContext(build([], None), None))
    assert [x.id for x in v] == ["unknown"] and "no serving stats" in v[0].cause


def test_window_keeps_the_last_seconds(tmp_path):
    old = [f"[2026-01-01 00:00:{s:02d} TP0] Decode batch, #running-req: 50, #token: 95000, token usage: 0.95, cuda "
           "graph: True, gen throughput (token/s): 800.00, #queue-req: 90" for s in range(0, 30, 10)]
    new = [f"[2026-01-01 00:20:{s:02d} TP0] Decode batch, #running-req: 3, #token: 900, token usage: 0.01, cuda "
           "graph: True, gen throughput (token/s): 90.00, #queue-req: 0" for s in range(0, 30, 10)]
    log = tmp_path / "x.log"
    log.write_text("\n".join(old + new) + "\n")
    assert diagnose(log=str(log), window_s=60).bottleneck == "client-bound"
    assert diagnose(log=str(log), window_s=3600).observed["queued"] == pytest.approx(45)
