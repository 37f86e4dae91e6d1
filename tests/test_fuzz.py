"""A fuzzer over kvplan's inputs (issue #9): launch commands (flags and env values), options, config.json files, log
lines and whole command lines. The property: no internal error (only KvplanError, exit 0/1/2 without "internal
error"), and bounded time for every example.

The default run is short (``KVPLAN_FUZZ_EXAMPLES``, 25 per test: a few seconds each); a long run by hand:

    KVPLAN_FUZZ_EXAMPLES=3000 python -m pytest -q -p no:cacheprovider tests/test_fuzz.py
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan import check
from kvplan.errors import KvplanError

EXAMPLES = int(os.environ.get("KVPLAN_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 25,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
BOUND_S = 15.0  # CPU seconds per example (process time: a busy machine's waits for a CPU do not count)
DATA = Path(__file__).parent / "data"
LOGS = sorted((DATA / "logs").glob("*.log"))

HOSTILE_NUM = ["nan", "NaN", "inf", "-inf", "+Inf", "1e400", "-1e400", "1e308", "-1", "0", "-0", "0.0", "1e-320",
               "99999999999999999999999", "4294967296", "2147483648", "1.5", "0.93", "8", "1e8", "", " ", "0x10",
               "1_000", "١٢", "8G", "8g", "-8G", "1e30G", "nanG", "abc", "--", "=", "True", "9" * 400,
               "0." + "9" * 400, "1" + "0" * 30, "9" * 5000, "0x" + "f" * 5000]
hostile_num = st.one_of(st.sampled_from(HOSTILE_NUM), st.integers(-(2**70), 2**70).map(str),
                        st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=6))
SANE = ["1", "2", "4", "8", "0.5", "0.85", "0.9", "20", "100", "4096", "16", "8G", "32768", "auto", "fp8_e5m2"]
# mostly sane values, so that an example gets past the first flag: one hostile value in a sane command
value = st.integers(0, 3).flatmap(lambda k: hostile_num if k == 0 else st.sampled_from(SANE))

SGL_FLAGS = ["--tp", "--tp-size", "--dp", "--pp-size", "--ep-size", "--nnodes", "--mem-fraction-static",
             "--max-total-tokens", "--max-running-requests", "--context-length", "--chunked-prefill-size",
             "--max-prefill-tokens", "--cuda-graph-max-bs", "--page-size", "--hicache-ratio", "--hicache-size",
             "--hicache-host-memory-fraction", "--swa-full-tokens-ratio", "--mamba-full-memory-ratio",
             "--max-mamba-cache-size", "--kv-cache-dtype", "--speculative-num-draft-tokens", "--dcp-size"]
SGL_BOOLS = ["--enable-dp-attention", "--enable-hierarchical-cache", "--disable-cuda-graph", "--disable-radix-cache"]
VLLM_FLAGS = ["-tp", "-pp", "-dp", "--gpu-memory-utilization", "--kv-cache-memory-bytes", "--block-size",
              "--max-model-len", "--max-num-seqs", "--max-num-batched-tokens", "--swap-space", "--cpu-offload-gb",
              "--kv-offloading-size", "--num-gpu-blocks-override", "--kv-cache-dtype", "--max-seq-len-to-capture"]
VLLM_BOOLS = ["--enforce-eager", "--enable-prefix-caching", "--disable-hybrid-kv-cache-manager"]
ENV_KEYS = ["LMCACHE_MAX_LOCAL_CPU_SIZE", "VLLM_CPU_KVCACHE_SPACE", "LMCACHE_CHUNK_SIZE", "LMCACHE_USE_LAYERWISE",
            "LMCACHE_SAVE_ONLY_FIRST_RANK"]
MODELS = ["Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.1-8B-Instruct", "moonshotai/Kimi-K2.5",
          "Qwen/Qwen3-Next-80B-A3B-Instruct", "google/gemma-3-27b-it"]
KTC = st.one_of(st.just('{"kv_connector":"LMCacheConnectorV1"}'),
                hostile_num.map(lambda v: '{"kv_connector":"LMCacheConnectorV1","kv_connector_extra_config":'
                                          '{"max_local_cpu_size": ' + json.dumps(v) + "}}"),
                st.sampled_from(["[" * 5000, "{", "null", '{"kv_connector": 5}', '"x"']))


def _bounded(fn, *args, **kw):
    t0 = time.process_time()
    try:
        return fn(*args, **kw)
    except KvplanError:
        return None
    finally:
        assert time.process_time() - t0 < BOUND_S, f"{fn.__name__} took {time.process_time() - t0:.1f} s"


@st.composite
def commands(draw) -> list[str]:
    if draw(st.booleans()):
        argv = ["python", "-m", "sglang.launch_server", "--model-path", draw(st.sampled_from(MODELS))]
        flags, bools = SGL_FLAGS, SGL_BOOLS
    else:
        argv = ["vllm", "serve", draw(st.sampled_from(MODELS))]
        flags, bools = VLLM_FLAGS, VLLM_BOOLS
        if draw(st.booleans()):
            argv += ["--kv-transfer-config", draw(KTC)]
    env = [f"{k}={v}" for k, v in draw(st.dictionaries(st.sampled_from(ENV_KEYS), value, max_size=3)).items()]
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 4)) == 0:
            argv.append(draw(st.sampled_from(bools)))
        else:
            argv += [draw(st.sampled_from(flags)), draw(value)]
    return env + argv


OPTION_VALUES = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70),
                          st.sampled_from([0, 1, 8, 80, 1024, 1e-9]))


@st.composite
def options(draw) -> dict:
    out = {"gpu": draw(st.sampled_from(["h100", "h200", "rtx-pro-6000", "a100"])), "host_mem_gib": 512.0}
    for k in ("gpu_mem_mib", "gpus_per_node", "nodes", "host_mem_gib", "weights_gib", "free_gib", "kv_memory_gib",
              "avg_tokens"):
        if draw(st.integers(0, 3)) == 0:
            out[k] = draw(OPTION_VALUES)
    return out


@FUZZ
@given(commands(), options())
def test_commands_and_options(cmd, opts):
    _bounded(check, cmd, **opts)


LLAMA = json.loads((DATA / "llama31_8b_config.json").read_text())
DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 61,
        "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280,
        "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256, "num_experts_per_tok": 8,
        "n_shared_experts": 1, "first_k_dense_replace": 3, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536, "max_position_embeddings": 163840,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
QNEXT = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "num_hidden_layers": 48,
         "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
         "vocab_size": 151936, "intermediate_size": 5120, "full_attention_interval": 4, "linear_num_key_heads": 16,
         "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
         "linear_conv_kernel_dim": 4, "max_position_embeddings": 262144, "num_experts": 512,
         "num_experts_per_tok": 10, "moe_intermediate_size": 512}
GEMMA3 = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "num_hidden_layers": 62,
          "hidden_size": 5376, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
          "vocab_size": 262208, "intermediate_size": 21504, "sliding_window": 1024, "sliding_window_pattern": 6,
          "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
json_junk = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=True, allow_infinity=True)
                         | st.integers(-(2**70), 2**70) | st.text(max_size=6),
                         lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                         max_leaves=6)
field_value = st.one_of(json_junk, st.sampled_from([0, -1, 1, 2, 1e8, 1e30, -128, 10_000, 10_001, 2**31, 2**40,
                                                    float("nan"), float("inf"), "8", [1], {"a": 1}, None]))


@st.composite
def configs(draw) -> dict:
    cfg = json.loads(json.dumps(draw(st.sampled_from([LLAMA, DSV3, QNEXT, GEMMA3]))))
    keys = sorted(cfg) + ["head_dim", "num_key_value_heads", "first_k_dense_replace", "sliding_window",
                          "rope_scaling", "text_config", "layer_types", "max_window_layers", "num_nextn_predict_layers"]
    for _ in range(draw(st.integers(1, 4))):
        cfg[draw(st.sampled_from(keys))] = draw(field_value)
    return cfg


@FUZZ
@given(configs(), st.booleans())
def test_config_json(tmp_path_factory, cfg, vllm):
    d = tmp_path_factory.mktemp("cfg")
    (d / "config.json").write_text(json.dumps(cfg))
    cmd = ["vllm", "serve", str(d)] if vllm else ["python", "-m", "sglang.launch_server", "--model-path", str(d)]
    _bounded(check, cmd, gpu="h100", host_mem_gib=512.0, model_config=str(d / "config.json"))


SERVING = [
    "[2025-09-01 10:00:00 TP0] Decode batch, #running-req: 52, #token: 105715, token usage: 0.91, cuda graph: True, "
    "gen throughput (token/s): 850.25, #queue-req: 100, ",
    "[2025-09-01 10:00:00 DP1 TP8] Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.05, "
    "#running-req: 0, #queue-req: 3",
    "[2025-09-01 10:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_tokens_gained: 900",
    "INFO 01-22 18:27:20 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 41.7 "
    "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%",
    "INFO 07-24 09:55:35 [loggers.py:118] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation "
    "throughput: 5.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.2%, "
    "Prefix cache hit rate: 50.0%",
    "[2025-09-01 10:00:00 TP0] Load weight begin. avail mem=79.10 GB",
    "[2025-09-01 10:00:00 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=7.25 GB, "
    "mem usage=71.85 GB.",
    "[2025-09-01 10:00:00 TP0] KV Cache is allocated. #tokens: 116171, KV size: 7.60 GB",
    "[2025-09-01 10:00:00 TP0] Memory pool end. avail mem=1.52 GB",
    "[2025-09-01 10:00:00 TP0] max_total_num_tokens=116171, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=2048, context_len=262144, available_gpu_mem=1.40 GB",
]


def _corpus_lines() -> list[str]:
    out: list[str] = SERVING * 20
    for p in LOGS + sorted(Path("/work/shared/logcorpus/raw").glob("*.txt"))[:40]:  # the shared corpus when present
        out += [x for x in p.read_text(errors="replace").splitlines() if x.strip()][:300]
    return out


CORPUS = _corpus_lines()


@st.composite
def log_lines(draw) -> list[str]:
    lines = []
    for _ in range(draw(st.integers(1, 30))):
        line = draw(st.sampled_from(CORPUS))
        if draw(st.booleans()):  # replace a number with a hostile one
            import re

            nums = list(re.finditer(r"\d+(?:\.\d+)?", line))
            if nums:
                m = nums[draw(st.integers(0, len(nums) - 1))]
                line = line[:m.start()] + draw(hostile_num) + line[m.end():]
        if draw(st.integers(0, 6)) == 0:
            line = line + draw(st.sampled_from(["a" * 20_000, ": " * 5000, "#x: 1, " * 3000, "\x1b[31m", "\x00"]))
        lines.append(line)
    return lines


@FUZZ
@given(log_lines(), st.sampled_from(["explain", "diagnose"]))
def test_log_lines(tmp_path_factory, lines, what):
    from kvplan.diagnose.run import diagnose
    from kvplan.explain import explain

    p = tmp_path_factory.mktemp("log") / "server.log"
    p.write_text("\n".join(lines) + "\n", errors="replace")
    if what == "explain":
        _bounded(explain, str(p), None, gpu="h100", host_mem_gib=1024.0)
    else:
        _bounded(diagnose, log=str(p), gpu="h100")


ARGV_WORDS = ["check", "plan", "explain", "diagnose", "gpus", "models", "cleanup", "--gpu", "h100", "--gpu-mem-mib",
              "--host-mem-gib", "--weights-gib", "--free-gib", "--kv-memory-gib", "--avg-tokens", "--nodes",
              "--gpus-per-node", "--engine-version", "0.5.9", "0.11.0", "--json", "--model", "Qwen/Qwen3-8B", "--tp",
              "--window", "--log", "/nonexistent", "--url", "--example", "--", "--mem-fraction-static",
              "--hicache-size", "--context-length", "--min-age", "--dry-run", "--pp", "64", "--html", "/proc/self/mem",
              "/dev/null", "--model-config", "/" + "a" * 300, "-f", "simulate", "--workload", "--bogus-flag"]


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(ARGV_WORDS), hostile_num), max_size=10), st.sampled_from(
    [[], ["--", "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"],
     ["--", "vllm", "serve", "Qwen/Qwen3-8B"]]))
def test_command_lines(argv, tail):
    from kvplan.cli.main import main

    if "cleanup" in argv or "--url" in argv:  # the fuzzer never acts on the machine or the network
        return
    err, out = io.StringIO(), io.StringIO()
    t0 = time.process_time()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main([*argv, *tail])
        except SystemExit as e:  # argparse usage errors
            code = e.code if isinstance(e.code, int) else 2
    assert time.process_time() - t0 < BOUND_S
    assert code in (0, 1, 2) and "internal error" not in err.getvalue() and "Traceback" not in err.getvalue(), \
        (argv, err.getvalue()[-500:])


# ------------------------------------------------------------------------------------------ issue #22
API_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                     st.text(max_size=8), st.lists(st.integers(0, 3), max_size=2),
                     st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                     st.sampled_from(["vllm", "sglang", "/" + "a" * 300, "x" * 5000, "8", "2"]))


@FUZZ
@given(st.dictionaries(st.sampled_from(["model", "engine", "tp", "dp", "pp", "extra_args", "gpu", "nodes",
                                        "host_mem_gib", "engine_version", "model_config", "bogus"]), API_JUNK,
                       min_size=1, max_size=3))
def test_api_arguments_of_any_type(kw):
    from kvplan import plan

    args = {"model": "Qwen/Qwen3-8B", "gpu": "h100", **kw}
    _bounded(plan, args.pop("model"), **args)  # a plan or a KvplanError, never TypeError / ValueError


COMMAND_TEXT = st.lists(st.sampled_from(["vllm", "serve", "Qwen/Qwen3-8B", "python", "-m", "sglang.launch_server",
                                         "--model-path", "--tp", "8", "'", '"', "\\", "#", ";", "&&", "|", "$(x)",
                                         "${A:-b}", "a" * 3000, "--bogus", "\n", "=", "-pp", "64"]),
                        max_size=20).map(" ".join)


@FUZZ
@given(COMMAND_TEXT)
def test_launch_commands_given_as_one_string(text):
    _bounded(check, text, gpu="h100", host_mem_gib=512.0)


JSON_JUNK = st.sampled_from(["[" * 5000 + "]" * 5000, "9" * 5000, "-" + "9" * 70, "1e99999", "NaN", "Infinity",
                             '"' + "x" * 100_000 + '"', "{" * 100, "[1,", "null", "true", '{"a": ' * 80 + "1" +
                             "}" * 80])


@FUZZ
@given(st.sampled_from([LLAMA, DSV3, GEMMA3]), st.integers(0, 10_000), JSON_JUNK)
def test_config_json_text_with_hostile_json(tmp_path_factory, base, at, junk):
    text = json.dumps(base)
    keys = [m.end() for m in __import__("re").finditer(r'": ', text)]
    at = keys[at % len(keys)]
    end = min(len(text), at + max(1, text[at:].find(",") if "," in text[at:] else 1))
    d = tmp_path_factory.mktemp("cfgtext")
    (d / "config.json").write_text(text[:at] + junk + text[end:])
    _bounded(check, ["vllm", "serve", str(d)], gpu="h100", host_mem_gib=512.0, model_config=str(d / "config.json"))


@FUZZ
@given(st.lists(st.one_of(JSON_JUNK, st.just('{"prompt_len": 10, "output_len": 5}'),
                          st.just('{"prompt_len": [1], "output_len": {"a": 1}}')), min_size=1, max_size=4))
def test_workload_files_with_hostile_json(tmp_path_factory, lines):
    from kvplan.simulate.workload.files import load_file

    p = tmp_path_factory.mktemp("wl") / "w.jsonl"
    p.write_text("\n".join(lines) + "\n")

    def read() -> None:
        w = load_file(str(p), concurrency=2)
        for _ in w.stream():
            pass

    _bounded(read)
