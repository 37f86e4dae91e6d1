"""SGLang log parser (kvplan.engines.sglang.log): the corpus cases of ../shared/logcorpus, the literal examples of
../shared/reference/sglang-memory.md (sections 2.5 and 3), ServerArgs dumps, interleaved ranks, and fuzzing.

Which rank a corpus case's figures belong to: the case records one rank's figures without naming it. They are
TP0's when the file prints TP0 (sglang-6001 lists TP5, TP3, TP2, TP7 before TP0 and the case holds TP0's 103.67),
else the first rank the file prints (sglang-pr15909: TP2, whose "Memory pool end" is 12.45, not TP3's 12.68), else
the unprefixed "" rank; that is ``LogFacts.first_rank()``. Keys ending in ``_tpN`` name their rank; per-rank host
figures hold on every rank.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import fields

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.engines.sglang import log as sglang
from kvplan.logs.facts import LogFacts, RankFacts
from kvplan.logs.reader import iter_lines
from tests.conftest import CORPUS

# observed key -> RankFacts field / LogFacts field / args key
RANK_KEYS = {"load_begin_avail_gb": "load_begin_avail_gib", "load_avail_gb": "load_end_avail_gib",
             "load_mem_usage_gb": "weights_gib", "kv_tokens": "kv_tokens", "k_size_gb": "k_size_gib",
             "v_size_gb": "v_size_gib", "kv_size_gb": "kv_size_gib", "pool_end_avail_gb": "pool_end_avail_gib",
             "cuda_graph_begin_avail_gb": "graph_begin_avail_gib", "cuda_graph_mem_usage_gb": "graph_mem_gib",
             "cuda_graph_end_avail_gb": "graph_end_avail_gib"}
GLOBAL_KEYS = {"max_total_num_tokens": "kv_tokens", "max_running_requests": "max_running_requests",
               "context_len": "context_len", "available_gpu_mem_gb": "available_gpu_mem_gib"}
ARG_KEYS = {"max_prefill_tokens": "_max_prefill_tokens", "profiled_max_total_num_tokens":
            "_profiled_max_total_num_tokens", "full_layer_tokens": "_full_layer_tokens",
            "swa_layer_tokens": "_swa_layer_tokens", "mamba_cache_size": "_max_mamba_cache_size",
            "conv_state_gb": "_mamba_conv_state_gib", "ssm_state_gb": "_mamba_ssm_state_gib",
            "host_requested_gb": "_host_requested_gb", "host_free_gb": "_host_free_gb"}
# observed figures no SGLang line of the raw file prints, with the reason
NOT_FROM_LOG = {
    "aiter_workspace_gb": "a debug print the PR author added ('###### self.workspace_buffer size')",
    "cuda_graph_time_s": "elapsed time: LogFacts has no field for it",
    "fp8_load_avail_gb": "second run pasted under the first with no ServerArgs dump between: read as a draft load",
    "fp8_load_mem_usage_gb": "same as fp8_load_avail_gb (its weights land in args['_draft_weights_gib'])",
}
# cases whose raw file holds no SGLang log line with their figures
NO_FIGURES = {
    "sglang-5372-hicache-oom-dsr1": "only user/maintainer prose; observed are outcomes",
    "sglang-pr29263-glm52-nvfp4-hicache150-hostoom": "PR prose quoting the sizes, no log line",
    "sglang-pr28620-dsv4-flash-fp8-8xl20": "PR prose in backticks (three runs), no log line",
}


def _cases() -> list[dict]:
    path = CORPUS / "cases.jsonl"
    assert path.is_file(), f"logcorpus not found at {CORPUS} (CI has ../shared beside the clone)"
    return [c for c in map(json.loads, path.read_text().splitlines()) if c["engine"].startswith("sglang")]


def _parse_file(raw_file: str) -> LogFacts:
    return sglang.parse(iter_lines(CORPUS / raw_file))


def _check_key(facts: LogFacts, key: str, want) -> bool:
    """Assert one observed figure; False when the key is not one the parser reads."""
    rank = facts.first_rank()
    m = re.fullmatch(r"(.+)_tp(\d+)", key)
    if m and m.group(1) in RANK_KEYS:
        assert getattr(facts.ranks[f"TP{m.group(2)}"], RANK_KEYS[m.group(1)]) == want, key
    elif key.startswith("bf16_") and key[5:] in RANK_KEYS:  # sglang-8337: the first of two pasted runs
        assert getattr(rank, RANK_KEYS[key[5:]]) == want, key
    elif key in RANK_KEYS:
        assert getattr(rank, RANK_KEYS[key]) == want, key
    elif key in GLOBAL_KEYS:
        assert getattr(facts, GLOBAL_KEYS[key]) == want, key
    elif key in ARG_KEYS:
        assert facts.args[ARG_KEYS[key]] == want, key
    elif key == "host_alloc_gb_per_rank":
        assert [r.host_pool_gb for r in facts.ranks.values()] == [want] * len(facts.ranks), key
    elif key == "ranks":
        assert len(facts.ranks) == want
    elif key.startswith("host_total_gb"):
        assert sum(r.host_pool_gb for r in facts.ranks.values()) == pytest.approx(want, rel=0.01)
    else:
        return False
    return True


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["id"])
def test_corpus_case(case):
    facts = _parse_file(case["raw_file"])
    assert facts.engine == "sglang"
    if case["id"] in NO_FIGURES:
        assert not any(vars(r).values() for r in facts.ranks.values())
        return
    checked = []
    for key, want in case["observed"].items():
        if key in NOT_FROM_LOG:
            continue
        assert _check_key(facts, key, want), f"observed key {key!r} of {case['id']} is not mapped"
        checked.append(key)
    assert checked


def test_corpus_extras():
    """Figures the cases do not list but the files print."""
    docs = _parse_file("raw/sglang-docs-llama31-8b-80gb-v041.txt")
    assert docs.args["mem_fraction_static"] == 0.88 and docs.args["cuda_graph_max_bs"] == 160
    assert docs.args["tp_size"] == 1 and docs.args["quantization"] is None and docs.args["context_length"] is None
    assert docs.model == "meta-llama/Meta-Llama-3.1-8B-Instruct" and docs.args["_launches"] == 1
    assert "0.4.1-0.4.3 (KV line without #tokens)" in docs.version_hint
    dsv3 = _parse_file("raw/ktransformers-1804-dsv3-kt-tp2-maxtotal10k.txt")
    assert dsv3.ranks["TP1"].pool_end_avail_gib == 30.11 and dsv3.ranks["TP1"].graph_begin_avail_gib == 30.10
    assert dsv3.ranks["TP0"].kv_dtype == "torch.bfloat16"
    pp = _parse_file("raw/sglang-8337-qwen3-235b-pp4tp8-fp8-online.txt")
    assert list(pp.ranks) == ["TP0 PP0"] and pp.args["_draft_weights_gib"] == {"TP0 PP0": 19.99}
    oom = _parse_file("raw/sglang-7227-qwen3-4b-32gb-oom-at-graph.txt")
    assert oom.errors == ["[2025-06-19 15:12:27] Scheduler hit an exception: Traceback (most recent call last):"]
    host = _parse_file("raw/sglang-8102-hicache-not-enough-host-mem.txt")
    assert host.errors[0].startswith("ValueError: Not enough host memory available. Requesting 40.00 GB")
    assert _parse_file("raw/sglang-31600-glm52-hicache-120gb-per-rank.txt").first_rank() is not None
    assert _parse_file("raw/sglang-pr4760-llama31-8b-fa3.txt").ranks["TP0"].pool_end_avail_gib is None  # cut line
    assert _parse_file("raw/llmtracker-sglang03-mi300x-llama3-8b-bench.txt").version_hint.startswith("0.3.x")


def test_throughput_files_detected():
    rows = [json.loads(x) for x in (CORPUS / "throughput.jsonl").read_text().splitlines()]
    sgl = [r for r in rows if r["engine"].startswith("sglang")]
    assert len(sgl) >= 4
    for r in sgl:
        lines = list(iter_lines(CORPUS / "raw" / f"{r['id']}.txt"))
        assert any(sglang.looks_like(ln) for ln in lines), r["id"]
        hint = sglang.parse(lines).version_hint
        assert hint in ("<0.5.x (Decode batch.)", "0.5.x+ (Decode batch,)"), r["id"]


def test_no_false_positive_on_vllm_logs():
    for path in sorted((CORPUS / "raw").glob("*.txt")):
        if any(w in path.name for w in ("sglang", "ktransformers", "glm5")):
            continue
        hits = [ln for ln in iter_lines(path) if sglang.looks_like(ln)]
        assert not hits, (path.name, hits[:2])


# Literal lines of the reference notes (section 3.1 / 2.5), with what they must give.
REFERENCE = [
    ("[2025-10-16 09:06:09 TP0] Init torch distributed ends. mem usage=1.96 GB", "TP0", "dist_init_mem_gib", 1.96),
    ("[2025-10-16 09:06:10 TP0] Load weight begin. avail mem=137.34 GB", "TP0", "load_begin_avail_gib", 137.34),
    ("[2025-03-25 16:37:06 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.48 GB, "
     "mem usage=15.11 GB.", "TP0", "weights_gib", 15.11),
    ("[2025-03-25 16:37:06 TP0] KV Cache is allocated. #tokens: 442750, K size: 27.02 GB, V size: 27.02 GB", "TP0",
     "kv_tokens", 442750),
    ("[2025-03-25 16:37:06 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=8.17 GB",
     "TP0", "graph_begin_avail_gib", 8.17),
    ("[2026-06-08 07:20:53 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1106304, K size: 25.32 GB, "
     "V size: 25.32 GB", "TP0", "k_size_gib", 25.32),
    ("[2026-06-08 07:20:53 TP0] Memory pool end. avail mem=12.05 GB", "TP0", "pool_end_avail_gib", 12.05),
    ("[2026-07-01 15:19:55 TP10] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 387968, K size: 5.92 GB, "
     "V size: 5.92 GB", "TP10", "kv_dtype", "torch.bfloat16"),
    ("[2025-11-30 12:50:10] KV Cache is allocated. #tokens: 2243474, K size: 59.91 GB, V size: 59.91 GB", "",
     "v_size_gib", 59.91),
    ("[2025-11-30 12:50:10] Capture cuda graph end. Time elapsed: 5.37 s. mem usage=1.44 GB. avail mem=38.05 GB.", "",
     "graph_end_avail_gib", 38.05),
    ("[2025-11-10 19:59:09 TP0] Capture cuda graph end. Time elapsed: 11.39 s. mem usage=1.00 GB. avail mem=11.17 "
     "GB.", "TP0", "graph_mem_gib", 1.00),
    ("[2025-07-29 18:14:43 TP0] Capture cuda graph end. Time elapsed: 19.50 s. mem usage=6.19 GB. avail mem=5.24 GB.",
     "TP0", "graph_mem_gib", 6.19),
    ("[2025-02-17 05:27:24 TP0] Load weight end. elapsed=228.09 s, type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, "
     "avail mem=194.04 GB, mem usage=89.58 GB.", "TP0", "load_end_avail_gib", 194.04),
    ("[2024-12-13 01:44:59 TP0] Load weight end. type=MistralForCausalLM, dtype=torch.bfloat16, avail mem=9.69 GB",
     "TP0", "load_end_avail_gib", 9.69),
    ("[22:30:52 TP0] Load weight begin. avail mem=191.33 GB", "TP0", "load_begin_avail_gib", 191.33),
    ("[2026-07-18 03:03:06 ATTN_CP5 TP5] Allocating 120.00 GB host memory for hierarchical KV cache.",
     "ATTN_CP5 TP5", "host_pool_gb", 120.0),
    ("[2025-12-02 07:04:51 DisaggregationMode.IGPUDECODE TP1] Allocating 40.00 GB host memory for hierarchical KV "
     "cache.", "TP1", "host_pool_gb", 40.0),
    ("[2025-05-05 03:55:08 TP0] KV Cache is allocated. #tokens: 274934, KV size: 17.99 GB", "TP0", "kv_size_gib",
     17.99),
]


@pytest.mark.parametrize("line, label, attr, want", REFERENCE, ids=[f"{i}-{r[2]}" for i, r in enumerate(REFERENCE)])
def test_reference_line(line, label, attr, want):
    facts = sglang.parse([line])
    assert sglang.looks_like(line)
    assert list(facts.ranks) == [label] and getattr(facts.ranks[label], attr) == want
    assert facts.lines_read == facts.lines_matched == 1


def test_reference_global_lines():
    f = sglang.parse([
        "[2025-08-11 17:17:03] max_total_num_tokens=665690, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=4096, context_len=65536, available_gpu_mem=13.50 GB",
        "[2025-09-05 20:48:29 TP0] Capture cuda graph end. Time elapsed: 12.11 s. mem usage=0.54 GB. "
        "avail mem=16.74 GB.",
        "[2025-09-05 20:50:29 TP0] Capture draft cuda graph end. Time elapsed: 62.67 s. mem usage=0.21 GB. "
        "avail mem=15.31 GB."])
    assert (f.kv_tokens, f.chunked_prefill_size, f.max_running_requests, f.context_len) == (665690, 8192, 4096, 65536)
    assert f.available_gpu_mem_gib == 13.50 and f.args["_max_prefill_tokens"] == 16384 and f.ranks.keys() == {"TP0"}
    tp0 = f.ranks["TP0"]
    assert (tp0.graph_mem_gib, tp0.graph_end_avail_gib, f.args["_graph_extra_gib"]) == (0.54, 15.31, {"TP0": 0.21})
    assert "0.4.10+ (summary has available_gpu_mem)" in f.version_hint
    old = sglang.parse(["[2025-02-12 03:17:56 TP1] max_total_num_tokens=413096, max_prefill_tokens=16384, "
                        "max_running_requests=4097, context_len=32768", "max_total_num_tokens=1256440"])
    assert old.kv_tokens == 1256440 and old.context_len == 32768 and old.chunked_prefill_size is None
    assert old.ranks == {}  # the summary is a global fact


def test_new_formats_0_5_20():
    f = sglang.parse([
        "[2026-11-01 10:00:00] server_args={'model_path': 'Qwen/Qwen3-8B', 'tp_size': 2, 'memory': "
        "{'mem_fraction_static': 0.85, 'page_size': 64}, 'api_key': None}",
        "[2026-11-01 10:00:05 TP1] Memory baseline taken. mem usage=1.21 GB",
        "[2026-11-01 10:00:09 TP1] Load weight end. elapsed=3.10 s, type=Qwen3ForCausalLM, quant=fp8, fmt=e4m3, "
        "avail mem=70.10 GB, mem usage=8.50 GB.",
        "[2026-11-01 10:00:10 TP1] Use sliding window memory pool. full_layer_tokens=375360, swa_layer_tokens=300288",
        "[2026-11-01 10:00:10 TP1] Mamba Cache is allocated. max_mamba_cache_size: 82, conv_state size: 0.13GB, "
        "ssm_state size: 7.29GB",
        "[2026-11-01 10:00:11 TP1] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
        "avail mem=9.00 GB",
        "[2026-11-01 10:00:21 TP1] Capture target decode CUDA graph end. bs=[1, 2, 4], elapsed=9.99 s, "
        "mem usage=0.80 GB, avail mem=8.20 GB.",
        "[2026-11-01 10:00:22 TP1] Capture target prefill CUDA graph end. elapsed=1.00 s, mem usage=0.30 GB, "
        "avail mem=7.90 GB.",
        "[2026-11-01 10:00:23 TP1] Allocating kv hierarchical KV host pool: 1000000 tokens, 37.75 GB host memory.",
        "[2026-11-01 10:00:23 TP1] Allocating draft hierarchical KV host pool: 1000000 tokens, 2.25 GB host memory.",
    ])
    r = f.ranks["TP1"]
    assert f.model == "Qwen/Qwen3-8B" and f.args["tp_size"] == 2 and f.args["mem_fraction_static"] == 0.85
    assert f.args["memory"] == {"mem_fraction_static": 0.85, "page_size": 64} and f.args["api_key"] is None
    assert (r.dist_init_mem_gib, r.load_end_avail_gib, r.weights_gib) == (1.21, 70.10, 8.50)
    assert (r.graph_begin_avail_gib, r.graph_mem_gib, r.graph_end_avail_gib) == (9.00, 0.80, 7.90)
    assert f.args["_graph_extra_gib"] == {"TP1": 0.30}
    assert (r.host_pool_gb, r.host_pool_tokens) == (40.0, 1000000)  # every host pool of the rank
    assert f.args["_host_pools_gb"] == {"kv": 37.75, "draft": 2.25}
    assert (f.args["_swa_layer_tokens"], f.args["_full_layer_tokens"]) == (300288, 375360)
    assert (f.args["_max_mamba_cache_size"], f.args["_mamba_ssm_state_gib"]) == (82, 7.29)
    for h in ("0.5.20+ (server_args={...} dump)", "0.5.21+ (Memory baseline taken)",
              "0.5.10+ (Capture target ... CUDA graph)", "0.5.20+ (hierarchical KV host pool line)"):
        assert h in f.version_hint
    assert f.lines_matched == f.lines_read == 10


def test_server_args_nested_quotes_and_lists():
    dump = ("[2025-04-28 06:50:02] server_args=ServerArgs(model_path='qwen/qwen2.5-0.5b-instruct', "
            "served_model_name='a \"quoted\", name', chat_template=\"it's, (really) [odd]\", "
            "json_model_override_args='{\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}}', "
            "lora_paths=['a,b', \"c]d\", {'x': (1, 2)}], cuda_graph_bs=[1, 2, 4, 8], mem_fraction_static=0.88, "
            "disaggregation_mode=<DisaggregationMode.NULL: 'null'>, max_total_tokens=20480, hicache_ratio=inf, "
            "weird=foo(1, 2), ..., page_size=1, tp_size=1, enable_dp_attention=False, max_running_requests=None)")
    f = sglang.parse([dump])
    a = f.args
    assert a["model_path"] == "qwen/qwen2.5-0.5b-instruct" and f.model == a["model_path"]
    assert a["served_model_name"] == 'a "quoted", name' and a["chat_template"] == "it's, (really) [odd]"
    assert json.loads(a["json_model_override_args"])["rope_scaling"]["factor"] == 4.0
    assert a["lora_paths"] == ["a,b", "c]d", {"x": (1, 2)}] and a["cuda_graph_bs"] == [1, 2, 4, 8]
    assert (a["mem_fraction_static"], a["max_total_tokens"], a["page_size"], a["tp_size"]) == (0.88, 20480, 1, 1)
    assert a["hicache_ratio"] == float("inf") and a["enable_dp_attention"] is False
    assert a["max_running_requests"] is None
    assert "disaggregation_mode" not in a and "weird" not in a  # not literals: skipped, never evaluated
    # a dump cut by the reader's line limit keeps what it can read, drops the cut value
    cut = sglang.parse([dump[:dump.index("tp_size=1") + 7]]).args
    assert cut["page_size"] == 1 and "tp_size" not in cut and cut["mem_fraction_static"] == 0.88


def test_interleaved_ranks_with_prefix_garbage():
    per_rank = {}
    for t in range(4):
        label = f"DP{t // 2} TP{t}" if t else "DP0 TP0"
        per_rank[label] = [
            f"[2025-05-04 01:05:3{t} {label}] Load weight begin. avail mem={90 + t}.00 GB",
            f"[2025-05-04 01:05:3{t} {label}] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
            f"avail mem={10 + t}.50 GB, mem usage=79.{t}0 GB.",
            f"[2025-05-04 01:06:0{t} {label}] KV Cache is allocated. #tokens: {1000 * (t + 1)}, KV size: {t}.25 GB",
            f"[2025-05-04 01:06:0{t} {label}] Memory pool end. avail mem={t}.75 GB",
        ]
    garbage = ["(pid=4242) ", "sglang-1  | ", "", "2025-05-04T01:05:30.123Z stdout F "]
    rng, queues, lines = random.Random(7), {k: list(v) for k, v in per_rank.items()}, []
    while any(queues.values()):
        label = rng.choice([k for k, q in queues.items() if q])
        lines.append(rng.choice(garbage) + queues[label].pop(0))
        if rng.random() < 0.3:
            lines.append(rng.choice(["INFO:     127.0.0.1:5000 - \"GET /health HTTP/1.1\" 200 OK", "",
                                     "Loading safetensors checkpoint shards:  50% Completed | 1/2"]))
    f = sglang.parse(lines)
    assert set(f.ranks) == set(per_rank) == {"DP0 TP0", "DP0 TP1", "DP1 TP2", "DP1 TP3"}
    for t, label in enumerate(["DP0 TP0", "DP0 TP1", "DP1 TP2", "DP1 TP3"]):
        r = f.ranks[label]
        assert (r.load_begin_avail_gib, r.load_end_avail_gib, r.weights_gib) == (90 + t, 10 + t + 0.5, 79 + t / 10)
        assert (r.kv_tokens, r.kv_size_gib, r.pool_end_avail_gib) == (1000 * (t + 1), t + 0.25, t + 0.75)
    assert f.first_rank() is f.ranks["DP0 TP0"] and f.lines_matched == 16 and f.lines_read == len(lines)


def test_draft_model_and_relaunch():
    spec = sglang.parse([
        "[2025-09-05 20:40:00 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB, "
        "mem usage=16.00 GB.",
        "[2025-09-05 20:40:01 TP0] KV Cache is allocated. #tokens: 400000, K size: 20.00 GB, V size: 20.00 GB",
        "[2025-09-05 20:40:01 TP0] Memory pool end. avail mem=10.00 GB",
        "[2025-09-05 20:41:00 TP0] Load weight end. type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, "
        "avail mem=9.00 GB, mem usage=1.00 GB.",
        "[2025-09-05 20:41:01 TP0] KV Cache is allocated. #tokens: 400500, K size: 1.00 GB, V size: 1.00 GB",
        "[2025-09-05 20:41:01 TP0] Memory pool end. avail mem=7.00 GB",
    ])
    r = spec.ranks["TP0"]
    assert (r.weights_gib, r.kv_tokens, r.k_size_gib, r.pool_end_avail_gib) == (16.0, 400000, 20.0, 10.0)
    assert spec.args["_draft_weights_gib"] == {"TP0": 1.0} and spec.args["_model_class"] == "Qwen3ForCausalLM"
    two = sglang.parse([
        "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='a', mem_fraction_static=0.95, tp_size=1)",
        "[2025-01-01 00:00:10 TP0] Load weight end. type=X, dtype=torch.float16, avail mem=1.00 GB, mem usage=2.00 GB.",
        "[2025-01-01 00:00:11 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "[2025-01-01 00:01:00] server_args=ServerArgs(model_path='a', mem_fraction_static=0.85, tp_size=1)",
        "[2025-01-01 00:01:10 TP0] Load weight end. type=X, dtype=torch.float16, avail mem=3.00 GB, mem usage=2.00 GB.",
    ])
    assert two.args["mem_fraction_static"] == 0.85 and two.args["_launches"] == 2 and two.errors == []
    assert two.ranks["TP0"].load_end_avail_gib == 3.0 and two.lines_read == 5 and two.lines_matched == 5


ERRORS = [
    "ValueError: Not enough host memory available. Requesting 40.00 GB but only have 44.87 GB free. Please reduce "
    "the size of the hierarchical cache.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.19 GiB",
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
    "ValueError: max_total_num_tokens is too small; the weights leave no GPU memory for the KV cache",
    "[2025-06-19 15:12:27 TP3] Scheduler hit an exception: Traceback (most recent call last):",
]


def test_errors():
    noise = ["  File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 2339, in run",
             "[2025-06-19 15:12:27] The server is fired up and ready to roll!"]
    f = sglang.parse(["   " + e + "  " for e in ERRORS] + noise + ERRORS)  # duplicates kept once
    assert f.errors == ERRORS
    assert (f.args["_host_requested_gb"], f.args["_host_free_gb"]) == (40.0, 44.87)
    assert sglang.parse([ERRORS[1]] * 500).errors == [ERRORS[1]]


@pytest.mark.parametrize("line, version", [
    ("Successfully installed sgl-kernel-0.1.0 sglang-0.4.6.post1 torch-2.6.0", "0.4.6.post1"),
    ("pip install \"sglang[all]==0.4.6\"", "0.4.6"),
    ("pip install sglang==0.4.6", "0.4.6"),
    ("docker run --gpus all lmsysorg/sglang:v0.4.8.post1-rocm630-srt python3 -m sglang.launch_server", "0.4.8.post1"),
    ("[2025-10-16 09:06:00] sglang version=0.5.3", "0.5.3"),
    ("  File \"/usr/local/lib/python3.10/dist-packages/sglang/srt/server.py\", line 12", None),
])
def test_version(line, version):
    assert sglang.parse([line]).version == version


def test_version_hints():
    assert sglang.parse(["[2025-03-14 02:16:14 TP0] Decode batch. #running-req: 509, #token: 180776, token usage: "
                         "0.43, gen throughput (token/s): 7897.87, largest-len: 0, #queue-req: 0,"]).version_hint \
        == "<0.5.x (Decode batch.)"
    f = sglang.parse(["[2026-06-08 07:20:53 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1, K size: "
                      "0.01 GB, V size: 0.01 GB"])
    assert f.version_hint == "0.5.15+ (KV line has dtype:)" and f.version is None
    assert sglang.parse([]).version_hint is None


def test_never_raises_on_odd_iterables():
    def failing():
        yield "[2025-01-01 00:00:00 TP0] Memory pool end. avail mem=1.00 GB"
        raise OSError("disk gone")

    f = sglang.parse(failing())
    assert f.ranks["TP0"].pool_end_avail_gib == 1.0 and f.lines_read == 1
    f = sglang.parse([None, 42, b"[2025-01-01 00:00:00 TP0] Memory pool end. avail mem=2.00 GB", "x" * 70000])
    assert f.ranks["TP0"].pool_end_avail_gib == 2.0 and f.lines_read == 4
    assert not sglang.looks_like(None)  # type: ignore[arg-type]


# ---- fuzzing -------------------------------------------------------------------------------------------------
def _real_lines() -> list[str]:
    lines = [r[0] for r in REFERENCE] + ERRORS
    for path in sorted((CORPUS / "raw").glob("*.txt")):
        if any(w in path.name for w in ("sglang", "ktransformers", "glm5")):
            lines += [ln for ln in iter_lines(path) if not ln.startswith("#")]
    return lines


REAL = _real_lines()
NUMERIC = [f.name for f in fields(RankFacts) if f.name != "kv_dtype"]


def _sane(facts: LogFacts) -> None:
    assert isinstance(facts, LogFacts) and facts.engine == "sglang"
    assert facts.lines_matched <= facts.lines_read
    for r in facts.ranks.values():
        for name in NUMERIC:
            v = getattr(r, name)
            assert v is None or isinstance(v, (int, float)), (name, v)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=300), max_size=20))
def test_never_raises_on_random_text(lines):
    _sane(sglang.parse(lines))
    for ln in lines:
        sglang.looks_like(ln)


words = st.sampled_from(["server_args=ServerArgs(", "server_args={", "Load weight end. ", "avail mem=", "mem usage=",
                         "KV Cache is allocated. ", "#tokens: ", "K size: ", "KV size: ", " GB", ", ", "(", ")", "[",
                         "]", "{", "}", "'", '"', "\\", "=", "max_total_num_tokens=", "Capture cuda graph end. ",
                         "Allocating ", "hierarchical KV host pool: ", " TP1]", "-1", "1e999", "nan", "0x1F"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REAL), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 40), words | st.text(max_size=6)),
                                       max_size=4), st.integers(0, 400))
def test_never_raises_on_mutated_real_lines(line, edits, cut):
    for at, drop, insert in edits:
        at = min(at, len(line))
        line = line[:at] + insert + line[at + drop:]
    _sane(sglang.parse([line, line[:cut]]))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(REAL), st.integers(0, 400))
def test_truncation_never_gives_a_wrong_figure(line, cut):
    """A line cut anywhere gives a subset of the whole line's per-rank figures, never a different number."""
    whole, part = sglang.parse([line]), sglang.parse([line[:cut]])
    for label, r in part.ranks.items():
        for name in NUMERIC:
            got = getattr(r, name)
            assert got is None or got == getattr(whole.ranks[label], name), (line[:cut], name)
