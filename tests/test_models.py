"""Model architecture from config.json (file, dir, HF cache, catalog) and the embedded catalogs."""

from __future__ import annotations

import json

import pytest

from kvplan.errors import KvplanError, UnsupportedModel
from kvplan.hardware.gpus import lookup_gpu
from kvplan.models.catalog import catalog_entry, catalog_ids, resolve_model, spec_from_catalog
from kvplan.models.config import spec_from_config

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
         "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
         "vocab_size": 1000, "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}


def test_every_catalog_entry_loads_and_has_a_source():
    ids = catalog_ids()
    assert len(ids) >= 15
    for i in ids:
        e = catalog_entry(i)
        assert e["source"].startswith("https://huggingface.co/"), i
        assert e.get("read_from"), i
        spec = spec_from_catalog(e)
        assert spec.num_layers > 0, i
        assert (spec.weight_bytes or 0) > 0 or e.get("weights_unknown"), i


@pytest.mark.parametrize("name, layers, mla", [
    ("moonshotai/Kimi-K2.5", 61, True), ("kimi-k2.5", 61, True), ("deepseek-ai/DeepSeek-V3", 61, True),
    ("meta-llama/Llama-3.1-8B-Instruct", 32, False), ("meta-llama/Llama-3.1-405B-Instruct", 126, False),
])
def test_catalog_facts(name, layers, mla):
    spec = resolve_model(name)
    assert spec.num_layers == layers and spec.is_mla == mla
    if mla:
        assert (spec.kv_lora_rank, spec.qk_rope_head_dim) == (512, 64)


def test_kimi_k25_is_multimodal_with_nested_text_config():
    spec = resolve_model("moonshotai/Kimi-K2.5")
    assert spec.architecture == "KimiK25ForConditionalGeneration"
    assert spec.is_multimodal and spec.moe and spec.moe.num_experts == 384


def test_local_dir_with_safetensors_index(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123456789}}))
    spec = resolve_model(str(tmp_path))
    assert spec.weight_bytes == 123456789 and spec.num_kv_heads == 2 and spec.head_dim == 64


def test_hf_cache_lookup_offline(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--acme--tiny-llama" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps({**LLAMA, "num_hidden_layers": 7}))
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    assert resolve_model("acme/tiny-llama").num_layers == 7


def test_estimated_weights_from_config_say_so():
    spec = spec_from_config(LLAMA, name="x")
    assert spec.weight_bytes == spec.param_count * 2
    assert "estimated" in spec.weight_bytes_source


def test_layer_kinds():
    gemma3 = {"architectures": ["Gemma3ForConditionalGeneration"], "vision_config": {"num_hidden_layers": 27,
              "hidden_size": 1152}, "text_config": {"model_type": "gemma3_text", "hidden_size": 640,
              "num_hidden_layers": 12, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
              "intermediate_size": 2048, "vocab_size": 1000, "max_position_embeddings": 32768,
              "sliding_window": 512, "sliding_window_pattern": 6}}
    s = spec_from_config(gemma3, name="g")
    assert s.layer_kinds.count("full") == 2 and s.n_swa_layers == 10 and s.is_multimodal
    mistral = {**LLAMA, "architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 4096}
    assert spec_from_config(mistral).n_swa_layers == 4


def test_unsupported_and_incomplete():
    with pytest.raises(UnsupportedModel, match="unsupported architecture"):
        spec_from_config({**LLAMA, "architectures": ["RWKV7ForCausalLM"]})
    with pytest.raises(KvplanError, match="num_hidden_layers"):
        spec_from_config({k: v for k, v in LLAMA.items() if k != "num_hidden_layers"})
    with pytest.raises(KvplanError, match="kv_lora_rank"):
        spec_from_config({**LLAMA, "architectures": ["DeepseekV3ForCausalLM"], "v_head_dim": 128})


@pytest.mark.parametrize("name, mib", [
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887), ("rtx-pro-6000", 97887), ("h100", 81559),
    ("NVIDIA H100 80GB HBM3", 81559), ("nvidia h200", 143771), ("l40s", 46068), ("a100", 81920),
    ("A100-40GB", 40960), ("rtx-4090", 24564), ("mi300x", 196592),
])
def test_gpu_catalog(name, mib):
    assert lookup_gpu(name).total_mib == mib


def test_required_gpus_present():
    for alias in ("a100-40gb", "a100", "h100-pcie", "h100", "h100-nvl", "h200", "h20", "b200", "gb200", "l40s",
                  "l4", "a10g", "rtx-4090", "rtx-5090", "rtx-pro-6000", "mi300x", "mi325x"):
        assert lookup_gpu(alias).total_mib > 10_000, alias


@pytest.mark.parametrize("cfg, layers, heads, kv, hd, ctx", [
    ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768,
      "n_positions": 1024, "vocab_size": 50257}, 12, 12, 12, 64, 1024),
    ({"architectures": ["OPTForCausalLM"], "model_type": "opt", "num_hidden_layers": 12, "num_attention_heads": 12,
      "hidden_size": 768, "ffn_dim": 3072, "max_position_embeddings": 2048, "vocab_size": 50272}, 12, 12, 12, 64, 2048),
    ({"architectures": ["FalconForCausalLM"], "model_type": "falcon", "num_hidden_layers": 32,
      "num_attention_heads": 71, "hidden_size": 4544, "multi_query": True, "new_decoder_architecture": False,
      "vocab_size": 65024}, 32, 71, 1, 64, 2048),
    ({"architectures": ["FalconForCausalLM"], "model_type": "falcon", "num_hidden_layers": 60,
      "num_attention_heads": 128, "hidden_size": 8192, "num_kv_heads": 8, "new_decoder_architecture": True,
      "vocab_size": 65024}, 60, 128, 8, 64, 2048),
    ({"architectures": ["GPTBigCodeForCausalLM"], "model_type": "gpt_bigcode", "n_layer": 40, "n_head": 48,
      "n_embd": 6144, "multi_query": True, "n_positions": 8192, "vocab_size": 49152}, 40, 48, 1, 128, 8192),
])
def test_older_config_field_names(cfg, layers, heads, kv, hd, ctx):
    s = spec_from_config(cfg, name="x")
    assert (s.num_layers, s.num_attention_heads, s.num_kv_heads, s.head_dim, s.context_len) == (layers, heads, kv, hd,
                                                                                                 ctx)


def test_derived_max_len_follows_vllm():
    from kvplan.models.config import derived_max_len

    assert derived_max_len({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4}}) == 16384
    assert derived_max_len({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3",
                                                                                "factor": 8.0}}) == 131072
    yarn = {"type": "yarn", "factor": 40}
    assert derived_max_len({"max_position_embeddings": 163840, "rope_scaling": yarn}) == 163840
    assert derived_max_len({"max_position_embeddings": 8192, "seq_length": 4096}) == 4096
    assert derived_max_len({"max_position_embeddings": 8192, "model_max_length": 16384}) == 16384
    assert derived_max_len({"hidden_size": 4}) is None


def test_tokenizer_model_max_length_caps_vllm(tmp_path):
    from kvplan import check

    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 1024}))
    r = check(["VLLM_CPU_KVCACHE_SPACE=1", "vllm", "serve", str(tmp_path)], engine_version="0.32.0", host_mem_gib=8)
    assert r.plan.settings.max_model_len == 1024
