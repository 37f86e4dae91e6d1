"""The plan uses the per-module weights: per_rank.weights_gib, assumptions[] naming the parts and the source,
--weights-gib still overriding, a checkpoint directory read from its headers."""

from __future__ import annotations

import pytest

from kvplan import check
from tests.weights.test_headers import write_st

RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
KIMI = "python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 --mem-fraction-static 0.85"


def test_sglang_plan_names_the_estimated_parts():
    d = check(KIMI, gpu=RTX, host_mem_gib=449, engine_version="0.5.9").to_dict()
    assert d["per_rank"]["weights_gib"] == pytest.approx(72.2, abs=0.1)
    a = " ".join(d["assumptions"])
    assert "synthesized from config.json (no safetensors at hand)" in a and "experts 66.4" in a
    assert "fused_qkv_a_proj_with_mqa / kv_a_proj replicated" in a and "vision tower" in a
    assert d["settings"]["checkpoint_weights_bytes_per_rank"] / 2**30 == pytest.approx(72.2, abs=0.1)


def test_weights_gib_still_overrides():
    d = check(KIMI, gpu=RTX, host_mem_gib=449, engine_version="0.5.9", weights_gib=70.0).to_dict()
    assert d["per_rank"]["weights_gib"] == pytest.approx(70.0)
    assert any("--weights-gib" in a for a in d["assumptions"])


def test_checkpoint_dir_headers_are_read(tmp_path):
    cfg = ('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, '
           '"intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, '
           '"vocab_size": 300, "max_position_embeddings": 256, "torch_dtype": "bfloat16"}')
    (tmp_path / "config.json").write_text(cfg)
    # a checkpoint whose real tensors differ from what the config implies (an extra 1 MiB tensor): headers win
    write_st(tmp_path / "model.safetensors", {"model.embed_tokens.weight": ("BF16", [300, 64]),
                                              "model.extra.weight": ("BF16", [512, 1024])})
    for cmd in (f"vllm serve {tmp_path} --kv-cache-memory-bytes 1000000",
                f"python -m sglang.launch_server --model-path {tmp_path}"):
        d = check(cmd, gpu="h100", host_mem_gib=64).to_dict()
        a = " ".join(d["assumptions"])
        assert f"read from safetensors headers of 1 file(s) in {tmp_path}" in a
    # vLLM: 320 padded embedding rows x 64 x 2 B + the extra tensor (whole) + RoPE cache 256 x 16 x 2 B + the
    # config's one attention layer's 4 fp32 scale scalars (512-byte blocks); no layer weights (the headers say so)
    d = check(f"vllm serve {tmp_path} --kv-cache-memory-bytes 1000000", gpu="h100", host_mem_gib=64).to_dict()
    assert d["settings"]["checkpoint_weights_bytes_per_rank"] == 320 * 64 * 2 + 512 * 1024 * 2 + 256 * 16 * 2 + 4 * 512
