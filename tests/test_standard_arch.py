"""Architectures outside kvplan's list: plain attention is planned (with a warning naming it), the rest refused.

Real configs: tests/data/archs/*.json (each with its source URL). Expected KV bytes are the engines' MHA
formula written out by hand: kv_heads_per_rank × 2 (K and V) × head_dim × layers × 2 B (bf16).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan import check
from kvplan.errors import UnsupportedModel
from kvplan.models.catalog import CATALOG_FILE
from kvplan.models.config import spec_from_config

DATA = Path(__file__).parent / "data" / "archs"
SGL = ["python", "-m", "sglang.launch_server", "--model-path"]


def _cfg(name: str) -> dict:
    return json.loads((DATA / name).read_text())["config"]


def _write(tmp_path: Path, cfg: dict) -> str:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return str(p)


def test_seed_oss_is_planned_as_gqa(tmp_path):
    spec = spec_from_config(_cfg("seed_oss_36b_config.json"), name="ByteDance-Seed/Seed-OSS-36B-Instruct")
    assert spec.attention_kind == "GQA" and spec.num_kv_heads == 8 and spec.head_dim == 128
    assert any("SeedOssForCausalLM" in n for n in spec.notes)
    r = check([*SGL, "ByteDance-Seed/Seed-OSS-36B-Instruct", "--tp", "8", "--mem-fraction-static", "0.85"],
              model_config=_write(tmp_path, _cfg("seed_oss_36b_config.json")), gpu="h100", host_mem_gib=1000,
              engine_version="0.5.9")
    # 8 KV heads / TP8 = 1 per rank: 1 × 2 × 128 × 64 layers × 2 B = 32,768 B per token per rank
    assert r.plan.per_rank.kv_bytes_per_token == 32768
    f = [f for f in r.findings if f.id == "architecture-assumed"]
    assert f and f[0].severity == "warning" and "SeedOssForCausalLM" in f[0].message
    assert r.plan.assumptions[0].startswith("architecture SeedOssForCausalLM")
    assert r.verdict in ("warn", "fail")


def test_grok1_is_planned_as_gqa_moe(tmp_path):
    spec = spec_from_config(_cfg("grok1_config.json"), name="hpcai-tech/grok-1")
    assert spec.architecture == "Grok1ModelForCausalLM"
    assert spec.moe is not None and spec.moe.num_experts == 8
    # hidden 6144 / 48 heads = head_dim 128; 8 KV heads; 64 layers: 8 × 2 × 128 × 64 × 2 B = 262,144 B (TP1)
    r = check([*SGL, "grok-1", "--tp", "8", "--mem-fraction-static", "0.8"],
              model_config=_write(tmp_path, _cfg("grok1_config.json")), gpu="h200", host_mem_gib=1000,
              engine_version="0.5.9")
    assert r.plan.per_rank.kv_bytes_per_token == 262144 // 8
    assert r.plan.model.context_len == 8192


def test_grok2_style_disabled_window_fields_are_not_swa():
    # grok-2's config names the window but disables it: "sliding_window_size": -1, "global_attn_every_n": 1
    cfg = {"architectures": ["Grok1ForCausalLM"], "hidden_size": 8192, "num_attention_heads": 64,
           "num_key_value_heads": 8, "num_hidden_layers": 64, "head_dim": 128, "vocab_size": 131072,
           "max_position_embeddings": 131072, "sliding_window_size": -1, "global_attn_every_n": 1,
           "num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16384}
    assert spec_from_config(cfg, name="grok-2").attention_kind == "GQA"
    with pytest.raises(UnsupportedModel, match="sliding-window"):
        spec_from_config({**cfg, "sliding_window_size": 4096}, name="x")
    with pytest.raises(UnsupportedModel, match="interleaved"):
        spec_from_config({**cfg, "global_attn_every_n": 4}, name="x")


BASE = {"architectures": ["NewThingForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000, "max_position_embeddings": 8192}


@pytest.mark.parametrize("extra, reason", [
    ({"sliding_window": 4096}, "sliding-window"),
    ({"layer_types": ["sliding_attention", "full_attention"] * 16}, "per-layer attention types"),
    ({"attention_chunk_size": 8192}, "chunked local attention"),
    ({"kv_lora_rank": 512, "qk_rope_head_dim": 64}, "MLA"),
    ({"ssm_state_size": 128, "mamba_d_conv": 4}, "state-space"),
    ({"hybrid_override_pattern": "M*M*"}, "hybrid"),
    ({"linear_num_key_heads": 16}, "linear attention"),
    ({"cross_attention_layers": [3, 8, 13]}, "cross-attention"),
    ({"is_encoder_decoder": True}, "encoder-decoder"),
    ({"num_key_value_heads": [8] * 32}, "per-layer 'num_key_value_heads'"),
    ({"multi_query_group_num": 2, "kv_channels": 128}, "model-specific KV head layout"),
    ({"v_head_dim": 64, "head_dim": 128}, "different K and V head sizes"),
])
def test_special_fields_are_refused_with_the_reason(extra, reason):
    with pytest.raises(UnsupportedModel, match=reason) as e:
        spec_from_config({**BASE, **extra}, name="x")
    assert "NewThingForCausalLM" in str(e.value)


def test_disabled_special_fields_do_not_refuse():
    # Qwen-style "use_sliding_window": false with a window value; null MLA fields; all-full layer_types
    spec = spec_from_config({**BASE, "sliding_window": 4096, "use_sliding_window": False, "kv_lora_rank": None,
                             "layer_types": ["full_attention"] * 32}, name="x")
    assert spec.attention_kind == "GQA" and spec.layer_kinds == ("full",) * 32


def test_non_generative_or_incomplete_configs_are_refused():
    with pytest.raises(UnsupportedModel, match="not a decoder-only"):
        spec_from_config({**BASE, "architectures": ["NewThingForSequenceClassification"]}, name="x")
    cfg = dict(BASE)
    del cfg["num_attention_heads"]
    with pytest.raises(UnsupportedModel, match="num_attention_heads"):
        spec_from_config(cfg, name="x")


@pytest.mark.parametrize("entry_id", ["zai-org/GLM-5-FP8", "XiaomiMiMo/MiMo-V2-Flash"])
def test_catalog_unsupported_models_stay_refused(entry_id):
    # real configs kept in catalog.json 'unsupported_models': DSA/MLA (GLM-5) and hybrid SWA (MiMo-V2-Flash)
    data = json.loads(CATALOG_FILE.read_text())
    entry = next(e for e in data["unsupported_models"] if e["id"] == entry_id)
    with pytest.raises(UnsupportedModel):
        spec_from_config(entry["config"], name=entry_id)


def test_catalog_resolution_is_recorded():
    r = check([*SGL, "meta-llama/Llama-3.1-70B-Instruct", "--tp", "4", "--mem-fraction-static", "0.85"],
              gpu="h100", host_mem_gib=1000, engine_version="0.5.9")
    assert r.plan.assumptions[0].startswith(
        "resolved meta-llama/Llama-3.1-70B-Instruct to catalog entry meta-llama/Llama-3.1-70B")
    r = check([*SGL, "meta-llama/Llama-3.1-70B", "--tp", "4", "--mem-fraction-static", "0.85"],
              gpu="h100", host_mem_gib=1000, engine_version="0.5.9")
    assert not any(a.startswith("resolved") for a in r.plan.assumptions)


@pytest.mark.parametrize("arch", ["RWKV7ForCausalLM", "FalconH1ForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                                  "T5ForConditionalGeneration", "DeepseekV32ForCausalLM",
                                  "MllamaForConditionalGeneration"])
def test_families_known_to_differ_are_refused_by_name(arch):
    # even when a config copy kept only standard-looking fields
    with pytest.raises(UnsupportedModel, match="family"):
        spec_from_config({**BASE, "architectures": [arch]}, name="x")
