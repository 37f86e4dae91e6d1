"""Is an architecture kvplan does not list still plain (GQA/MHA/MQA) attention? Decided from config.json alone.

A decoder-only config with the standard fields (``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
``vocab_size``; optional ``num_key_value_heads``, ``head_dim``) lays out its KV cache the way both engines do it
for Llama (SGLang ``MHATokenToKVPool`` via ``ModelConfig.get_num_kv_heads`` / ``head_dim``; vLLM
``FullAttentionSpec``), unless a field says otherwise. Each field below changes the KV layout or the state an
engine keeps, so its presence (with a value that turns the feature on) keeps the architecture refused.
"""

from __future__ import annotations

import re
from typing import Any

GENERATIVE_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
# Families whose name already says the layers are not (only) plain attention, whatever fields a config copy kept:
# recurrent / state-space / hybrid-linear, encoder-decoder and cross-attention, sparse or shared-KV attention.
NON_ATTENTION_NAMES = re.compile(
    r"rwkv|mamba|jamba|zamba|hymba|bamba|xlstm|recurrentgemma|falconh1|nemotronh|lfm2|minimaxtext01|minimaxm1|"
    r"plamo2|kimilinear|qwen3_?5|qwen3next|granitemoehybrid|mllama|whisper|gemma3n|dsa|deepseekv3[2-9]|"
    r"deepseekv4|phi4flash|retnet|hgrn|^(m|um)?t5|^m?bart|^gla|^based|^mega", re.IGNORECASE)

# key -> what it means for the KV cache
SPECIAL_KEYS: dict[str, str] = {
    # sliding / chunked / interleaved local attention: per-layer windows or a separate SWA pool
    "sliding_window": "sliding-window attention", "sliding_window_size": "sliding-window attention",
    "sliding_window_pattern": "sliding-window attention", "interleaved_sliding_window": "sliding-window attention",
    "layer_types": "per-layer attention types", "attention_chunk_size": "chunked local attention",
    "global_attn_every_n": "interleaved local/global attention", "swa_num_attention_heads": "sliding-window attention",
    # MLA / DSA: a latent KV row instead of K and V heads
    "kv_lora_rank": "MLA (latent KV)", "q_lora_rank": "MLA (latent KV)", "qk_rope_head_dim": "MLA (latent KV)",
    "qk_nope_head_dim": "MLA (latent KV)", "use_mla": "MLA (latent KV)", "index_topk": "sparse attention indexer",
    "index_head_dim": "sparse attention indexer",
    # linear attention / state-space layers: a recurrent state pool instead of (some) KV
    "ssm_cfg": "state-space (Mamba) layers", "ssm_state_size": "state-space (Mamba) layers",
    "state_size": "state-space layers", "d_state": "state-space layers", "conv_kernel": "state-space layers",
    "conv_L_cache": "short-convolution layers", "hybrid_override_pattern": "hybrid attention/Mamba layers",
    "layers_block_type": "hybrid attention/Mamba layers", "attn_layer_period": "hybrid attention/Mamba layers",
    "attn_layer_offset": "hybrid attention/Mamba layers", "full_attention_interval": "hybrid linear attention",
    "linear_num_key_heads": "linear attention", "linear_attn_config": "linear attention",
    "attn_type_list": "hybrid linear attention", "layer_group_size": "hybrid linear attention",
    # cross-attention / encoder-decoder: an encoder cache and cross-attention KV
    "is_encoder_decoder": "encoder-decoder", "cross_attention_layers": "cross-attention layers",
    "encoder_layers": "encoder-decoder", "decoder_layers": "encoder-decoder", "num_decoder_layers": "encoder-decoder",
    "encoder_config": "encoder-decoder", "decoder_config": "encoder-decoder",
    # KV heads or sharing under non-standard keys
    "multi_query": "multi-query attention under a model-specific key",
    "new_decoder_architecture": "model-specific KV head layout", "n_head_kv": "model-specific KV head layout",
    "num_kv_heads": "model-specific KV head layout", "multi_query_group_num": "model-specific KV head layout",
    "kv_channels": "model-specific KV head layout", "num_kv_shared_layers": "KV shared across layers",
    "kv_sharing_layers": "KV shared across layers", "use_cla": "cross-layer attention (shared KV)",
    "cla_share_factor": "cross-layer attention (shared KV)", "v_head_dim": "different K and V head sizes",
    "block_configs": "per-layer block configurations",
}


def _on(key: str, val: Any, c: dict[str, Any]) -> bool:
    """Whether a special key's value turns its feature on (null, false, 0, -1, [] leave it off)."""
    if val is None or val is False or val == [] or val == {} or val == "":
        return False
    if isinstance(val, bool):
        return val
    if isinstance(val, (int, float)) and val <= 0:
        return False
    if key in ("sliding_window", "sliding_window_size") and c.get("use_sliding_window") is False:
        return False
    if key == "global_attn_every_n" and val == 1:
        return False
    if key == "layer_types" and isinstance(val, list):
        return any(t not in ("full_attention", "attention") for t in val)
    if key == "v_head_dim" and val == c.get("head_dim"):
        return False
    return True


def non_standard_reasons(arch: str, c: dict[str, Any], top: dict[str, Any]) -> list[str]:
    """Why an unlisted architecture is not plain attention ([] = it is). ``c`` is the text config,
    ``top`` the whole config.json (multimodal wrappers keep encoder-decoder flags there)."""
    reasons: list[str] = []
    if NON_ATTENTION_NAMES.search(arch.replace("-", "")):
        reasons.append(f"a name of a family with non-attention, encoder-decoder or shared/sparse-KV layers ({arch})")
    if not arch.endswith(GENERATIVE_SUFFIXES):
        reasons.append(f"a name that is not a decoder-only generation class ({arch})")
    for where in (c, top) if top is not c else (c,):
        for key, what in SPECIAL_KEYS.items():
            if key in where and _on(key, where[key], where):
                label = f"{what} ('{key}')"
                if label not in reasons:
                    reasons.append(label)
    for key in ("num_key_value_heads", "head_dim", "num_attention_heads"):
        if isinstance(c.get(key), list):
            reasons.append(f"per-layer '{key}'")
    if "audio_config" in top or "speech_config" in top:
        reasons.append("an audio encoder")
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"):
        if not isinstance(c.get(key), int) or isinstance(c.get(key), bool):
            reasons.append(f"no standard '{key}'")
    return reasons


def assumption(arch: str) -> str:
    return (f"architecture {arch} is not in kvplan's list: planned as standard attention (config.json has the "
            "standard fields and no sliding-window, MLA, linear-attention/SSM, cross-attention or encoder-decoder "
            "field); check the engine supports it")
