"""Real SGLang logs quoted in ../shared/reference/sglang-memory.md section 1.7, pinned within 0.05 %
(the rounding of the two-decimal GiB figures those logs print)."""

from __future__ import annotations

import json

import pytest

from kvplan import check


def _rel(a: int, b: int) -> float:
    return abs(a - b) / b


def test_pr4760_llama31_8b_tp1():
    # "Load weight end ... avail mem=63.48 GB, mem usage=15.11 GB" -> "KV Cache is allocated. #tokens: 442750"
    # P = 63.48 + 15.11 GiB; mem_fraction_static 0.88 (that version's default); bf16, 8 KV heads × 128, 32 layers.
    r = check(["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
               "--mem-fraction-static", "0.88"], gpu="h100", free_gib=63.48 + 15.11, weights_gib=15.11,
              engine_version="0.4.4", host_mem_gib=64)
    assert r.plan.per_rank.kv_bytes_per_token == 8 * 256 * 32 * 2
    assert _rel(r.plan.per_rank.kv_tokens, 442750) < 0.0005


@pytest.fixture
def qwen3_14b(tmp_path):
    # Qwen3-14B attention shape (HF config.json): 40 layers, 40 heads, 8 KV heads, head_dim 128.
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120,
           "intermediate_size": 17408, "num_hidden_layers": 40, "num_attention_heads": 40,
           "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
           "torch_dtype": "bfloat16"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return str(p)


def test_qwen3_14b_tp4(qwen3_14b):
    # mem_fraction_static=0.8, "avail mem=16.00 GB, mem usage=7.08 GB", "#tokens: 298447"
    r = check(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-14B", "--tp", "4",
               "--mem-fraction-static", "0.8"], gpu_mem_mib=24564, free_gib=16.00 + 7.08, weights_gib=7.08,
              model_config=qwen3_14b, engine_version="0.5.3", host_mem_gib=64)
    assert r.plan.per_rank.kv_bytes_per_token == 2 * 256 * 40 * 2  # 8 heads / TP4 = 2 per rank
    assert _rel(r.plan.per_rank.kv_tokens, 298447) < 0.0005
