"""Read a Hugging Face config.json (as JSON, never as code) into a ModelSpec.

Architectures whose KV layout kvplan knows are accepted; an unlisted one is planned as standard attention
when its config has only the standard fields (``standard_arch.py``, with a warning-level assumption naming
it); anything else raises UnsupportedModel with the architecture name and the field that differs, never a
guess. Multimodal checkpoints nest the language model under ``text_config`` (or ``language_config`` /
``llm_config``); the top-level ``architectures`` still decide.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError, UnsupportedModel
from kvplan.models.memo import Memo
from kvplan.models.spec import LinearAttnSpec, ModelSpec, MoESpec

_SPECS: Memo[ModelSpec] = Memo("specs from config.json", 64)

# Architecture -> family. Families: "mha" (MHA/GQA/MQA, optional SWA), "mla", "gdn", "mamba2".
ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "mha", "MistralForCausalLM": "mha", "MixtralForCausalLM": "mha",
    "Qwen2ForCausalLM": "mha", "Qwen2MoeForCausalLM": "mha", "Qwen3ForCausalLM": "mha",
    "Qwen3MoeForCausalLM": "mha", "Qwen2_5_VLForConditionalGeneration": "mha",
    "Qwen2VLForConditionalGeneration": "mha",
    "GemmaForCausalLM": "mha", "Gemma2ForCausalLM": "mha", "Gemma3ForCausalLM": "mha",
    "Gemma3ForConditionalGeneration": "mha", "GptOssForCausalLM": "mha",
    "Glm4MoeForCausalLM": "mha", "Glm4ForCausalLM": "mha", "Phi3ForCausalLM": "mha",
    "GraniteForCausalLM": "mha", "OlmoForCausalLM": "mha", "Olmo2ForCausalLM": "mha",
    "InternLM2ForCausalLM": "mha", "Starcoder2ForCausalLM": "mha",
    "DeepseekV2ForCausalLM": "mla", "DeepseekV3ForCausalLM": "mla", "KimiK25ForConditionalGeneration": "mla",
    "KimiVLForConditionalGeneration": "mla",
    "Qwen3NextForCausalLM": "gdn",
    "GPT2LMHeadModel": "mha", "OPTForCausalLM": "mha", "GPTNeoXForCausalLM": "mha", "FalconForCausalLM": "mha",
    "BloomForCausalLM": "mha", "PhiForCausalLM": "mha", "GPTBigCodeForCausalLM": "mha", "StableLmForCausalLM": "mha",
    "GPTJForCausalLM": "mha", "CohereForCausalLM": "mha", "ExaoneForCausalLM": "mha", "Qwen2_5OmniModel": "mha",
}

# Older configs name the same facts differently (transformers' attribute_map for each model type).
FIELD_ALIASES = {"n_layer": "num_hidden_layers", "n_head": "num_attention_heads", "n_embd": "hidden_size",
                 "n_inner": "intermediate_size", "ffn_dim": "intermediate_size",
                 "n_positions": "max_position_embeddings"}
# vLLM's derive_max_model_len_and_key (transformers_utils/model_arch_config_convertor.py): the smallest of these.
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
NO_ROPE_FACTOR = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


def derived_max_len(c: dict[str, Any]) -> int | None:
    """The context length vLLM derives from a text config (config/model.py::_get_and_verify_max_len):
    the smallest known length key (model_max_length wins), times the RoPE factor of scaling types that stretch
    the context (not llama3/yarn/longrope; not Gemma3)."""
    vals = [c[k] for k in MAX_LEN_KEYS if isinstance(c.get(k), (int, float)) and not isinstance(c.get(k), bool)]
    if not vals:
        return None
    length = float(c["model_max_length"]) if isinstance(c.get("model_max_length"), (int, float)) else min(vals)
    rope = c.get("rope_scaling") or c.get("rope_parameters")
    if isinstance(rope, dict) and "gemma3" not in str(c.get("model_type", "")):
        params = [rope] if "rope_type" in rope or "type" in rope or "factor" in rope else \
            [v for v in rope.values() if isinstance(v, dict)]
        factor = 1.0
        for rp in params:
            kind = rp.get("rope_type") or rp.get("type") or "default"
            if kind not in NO_ROPE_FACTOR and rp.get("factor"):
                factor = float(rp["factor"])
        length *= factor
    return int(length)

CONFIG_MAX_BYTES = 16 << 20  # the largest real config.json files are ~100 KB

TEXT_KEYS = ("text_config", "language_config", "llm_config")
NESTED_KEYS = ("vision_config", "quantization_config", "rope_scaling", "rope_parameters")
# transformers' Qwen2/Qwen3 configs drop sliding_window unless use_sliding_window is set
QWEN_GATED_SWA = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_5_vl", "qwen3_next")

# Defaults that transformers' config classes apply when config.json omits a key (cited per model_type).
HF_DEFAULTS: dict[str, dict[str, Any]] = {
    # transformers/models/gemma3/configuration_gemma3.py::Gemma3TextConfig
    "gemma3_text": {"sliding_window_pattern": 6, "sliding_window": 4096, "head_dim": 256,
                    "num_key_value_heads": 4, "vocab_size": 262208, "max_position_embeddings": 131072},
    # transformers/models/gemma2/configuration_gemma2.py::Gemma2Config
    "gemma2": {"sliding_window": 4096, "head_dim": 256},
}


def _text_part(cfg: dict[str, Any]) -> dict[str, Any]:
    for key in TEXT_KEYS:
        sub = cfg.get(key)
        if isinstance(sub, dict) and sub.get("num_hidden_layers"):
            return sub
    return cfg


def _req(c: dict[str, Any], key: str, where: str) -> Any:
    val = c.get(key)
    if val is None:
        raise KvplanError(f"{where}: config has no '{key}'",
                          "pass a complete config.json with --model-config, or --weights-gib if only weights are off")
    if isinstance(val, bool) or not isinstance(val, (int, float)) or val <= 0:
        raise KvplanError(f"{where}: '{key}' must be a positive number, got {val!r}")
    return int(val)


def _layer_kinds(c: dict[str, Any], n: int, family: str, model_type: str) -> tuple[str, ...]:
    lt = c.get("layer_types")
    if isinstance(lt, list) and len(lt) >= n:
        names = {"full_attention": "full", "sliding_attention": "swa", "linear_attention": "linear",
                 "attention": "full", "mamba": "linear"}
        kinds = []
        for t in lt[:n]:
            if t not in names:
                raise UnsupportedModel(f"unknown layer type {t!r} in layer_types")
            kinds.append(names[t])
        return tuple(kinds)
    if family == "gdn":
        step = int(c.get("full_attention_interval") or 4)
        return tuple("full" if (i + 1) % step == 0 else "linear" for i in range(n))
    if model_type == "gemma2":  # HF Gemma2: even layers slide
        return tuple("swa" if i % 2 == 0 else "full" for i in range(n))
    if model_type in ("gemma3", "gemma3_text"):  # HF Gemma3: every pattern-th layer is global
        pat = int(c.get("sliding_window_pattern") or c.get("_sliding_window_pattern")
                  or HF_DEFAULTS["gemma3_text"]["sliding_window_pattern"])
        return tuple("full" if (i + 1) % pat == 0 else "swa" for i in range(n))
    if c.get("use_sliding_window") and c.get("sliding_window"):
        mwl = int(c.get("max_window_layers") or n)
        return tuple("full" if i < mwl else "swa" for i in range(n))  # HF Qwen2: layers >= max_window_layers slide
    if c.get("sliding_window") and c.get("use_sliding_window") is not False and model_type not in QWEN_GATED_SWA:
        # no layer_types: vLLM puts cache_config.sliding_window on every layer (arg_utils.create_engine_config,
        # Attention.__init__) - Mistral, Phi-3, Starcoder2 ...; SGLang keeps full-length KV for them anyway
        return ("swa",) * n
    return ("full",) * n


def _moe(c: dict[str, Any], n_layers: int) -> MoESpec | None:
    experts = c.get("n_routed_experts") or c.get("num_experts") or c.get("num_local_experts")
    if not experts:
        return None
    inter = c.get("moe_intermediate_size") or c.get("intermediate_size") or 0
    shared = c.get("shared_expert_intermediate_size") or 0
    if not shared and c.get("n_shared_experts"):
        shared = int(c["n_shared_experts"]) * int(inter)
    dense = int(c.get("first_k_dense_replace") or 0)
    return MoESpec(num_experts=int(experts), experts_per_tok=int(c.get("num_experts_per_tok") or 1),
                   moe_intermediate_size=int(inter), shared_intermediate_size=int(shared),
                   moe_layers=n_layers - dense)


def _linear(c: dict[str, Any], family: str) -> LinearAttnSpec | None:
    if family != "gdn":
        return None
    w = "Qwen3-Next linear attention"
    nk, nv = _req(c, "linear_num_key_heads", w), _req(c, "linear_num_value_heads", w)
    dk, dv = _req(c, "linear_key_head_dim", w), _req(c, "linear_value_head_dim", w)
    # sglang configs/qwen3_next.py::Qwen3NextConfig.mamba2_cache_params: conv_dim = 2*K + V
    conv_dim = 2 * nk * dk + nv * dv
    return LinearAttnSpec(kind="gdn", conv_dim=conv_dim, conv_kernel=_req(c, "linear_conv_kernel_dim", w),
                          num_heads=nv, state_dims=(dk, dv))


def spec_from_config(cfg: dict[str, Any], name: str = "model", **extra: Any) -> ModelSpec:
    """Turn a config.json dict into a ModelSpec, or raise UnsupportedModel / KvplanError. Once per config content,
    name and extra fields: the same config read again (a --model-config file planned once more) gets the same spec,
    whose memoized facts it then shares."""
    try:
        key = (json.dumps(cfg, sort_keys=True, default=str), name, tuple(sorted(extra.items())))
        hash(key)
    except (TypeError, ValueError, RecursionError):
        return _checked_spec(cfg, name, **extra)
    return _SPECS.get(key, lambda: _checked_spec(cfg, name, **extra))


def _checked_spec(cfg: dict[str, Any], name: str, **extra: Any) -> ModelSpec:
    try:
        return _spec_from_config(cfg, name, **extra)
    except (TypeError, ValueError, AttributeError, ArithmeticError, IndexError, RecursionError) as e:
        if isinstance(e, KvplanError):
            raise
        raise KvplanError(f"{name}: config.json has a field of the wrong type or value ({e})",
                          "pass the checkpoint's original config.json with --model-config") from None


def _spec_from_config(cfg: dict[str, Any], name: str, **extra: Any) -> ModelSpec:
    if not isinstance(cfg, dict):
        raise KvplanError(f"{name}: config.json must be a JSON object")
    archs = cfg.get("architectures") or []
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise UnsupportedModel(f"{name}: config.json has no 'architectures' list",
                               "kvplan needs the architecture name to know the KV layout")
    arch = archs[0]
    for key in (*TEXT_KEYS, *NESTED_KEYS):  # read as maps further on (the text model, quantization, RoPE scaling)
        if cfg.get(key) is not None and not isinstance(cfg[key], dict):
            raise KvplanError(f"{name}: config.json {key} must be a JSON object, got {type(cfg[key]).__name__}",
                              "pass the checkpoint's original config.json with --model-config")
    family = ARCHITECTURES.get(arch)
    top = cfg
    c = dict(_text_part(cfg))
    for old, new in FIELD_ALIASES.items():
        if old in c and new not in c:
            c[new] = c[old]
    if family is None:  # standard_arch.py: plain attention unless a field says otherwise
        from kvplan.models.standard_arch import assumption, non_standard_reasons

        reasons = non_standard_reasons(arch, c, top)
        if reasons:
            raise UnsupportedModel(f"{name}: unsupported architecture {arch!r}: not in kvplan's list and it has "
                                   + "; ".join(reasons), "supported: " + ", ".join(sorted(ARCHITECTURES))
                                   + ", and any decoder-only config with only the standard attention fields")
        family = "mha"
        extra = {**extra, "notes": (*extra.get("notes", ()), assumption(arch))}
    model_type = str(c.get("model_type") or top.get("model_type") or "")
    for k, v in HF_DEFAULTS.get(model_type, {}).items():
        c.setdefault(k, v)
    from kvplan.models.config_checks import check_config_numbers, check_context_len

    check_config_numbers(c, top, family, name)
    n = _req(c, "num_hidden_layers", name)
    hidden = _req(c, "hidden_size", name)
    heads = _req(c, "num_attention_heads", name)
    kv_heads = int(c.get("num_key_value_heads") or heads)
    if arch in ("FalconForCausalLM", "GPTBigCodeForCausalLM"):  # vLLM get_total_num_kv_heads
        if c.get("new_decoder_architecture"):
            kv_heads = int(c.get("num_kv_heads") or heads)
        elif c.get("multi_query"):
            kv_heads = 1
    head_dim = int(c.get("head_dim") or hidden // heads)
    # transformers >= 4.56 (configuration_utils.py::PretrainedConfig.__init__) parses both keys and keeps "dtype"
    # over the older "torch_dtype"; vLLM reads the root config first, then the text config
    # (transformers_utils/model_arch_config_convertor.py::get_torch_dtype)
    dtype = str(top.get("dtype") or top.get("torch_dtype") or c.get("dtype") or c.get("torch_dtype") or "bfloat16")
    quant = top.get("quantization_config") or c.get("quantization_config") or {}
    kv_algo = str(quant.get("kv_cache_quant_algo") or "").upper() if isinstance(quant, dict) else ""
    kv_scheme = quant.get("kv_cache_scheme") if isinstance(quant, dict) else None
    if isinstance(kv_scheme, dict) and kv_scheme.get("num_bits") == 8 and kv_scheme.get("type") == "float":
        kv_algo = "FP8"  # compressed-tensors / modelopt checkpoints declare an fp8 KV cache this way
    vision = top.get("vision_config") if isinstance(top.get("vision_config"), dict) else None
    ctx = derived_max_len(c) or derived_max_len(top) or 2048  # engines assume 2048 when no key says (vLLM warns)
    check_context_len(ctx, name)
    common = dict(
        name=name, architecture=arch, model_type=model_type, num_layers=n, hidden_size=hidden, config=top,
        vocab_size=_req(c, "vocab_size", name), num_attention_heads=heads, context_len=ctx, dtype=dtype,
        intermediate_size=int(c.get("intermediate_size") or 0), moe=_moe(c, n),
        tie_word_embeddings=bool(c.get("tie_word_embeddings", top.get("tie_word_embeddings", False))),
        quant_method=(quant.get("quant_method") if isinstance(quant, dict) else None),
        kv_cache_fp8=kv_algo.startswith("FP8"),
        is_multimodal=vision is not None,
        # Kimi-K2.5 writes vt_num_hidden_layers / vt_hidden_size; SGLang's KimiK25VisionConfig holds the same
        # values as num_hidden_layers / hidden_size (27, 1152: its defaults, https://github.com/sgl-project/sglang/
        # blob/v0.5.9/python/sglang/srt/configs/kimi_k25.py), which adjust_mem_fraction_for_vlm reads
        vit_layers=(vision or {}).get("num_hidden_layers") or (vision or {}).get("depth")
        or (vision or {}).get("vt_num_hidden_layers"),
        vit_hidden=(vision or {}).get("hidden_size") or (vision or {}).get("vt_hidden_size"),
        num_nextn_predict_layers=int(c.get("num_nextn_predict_layers") or 0),
    )
    common.update(extra)
    quant_d = quant if isinstance(quant, dict) else None
    if family == "mla":
        w = f"{name} (MLA)"
        return _with_weights(ModelSpec(
            **common, attention="mla", num_kv_heads=1, head_dim=0,
            v_head_dim=_req(c, "v_head_dim", w), kv_lora_rank=_req(c, "kv_lora_rank", w),
            qk_rope_head_dim=_req(c, "qk_rope_head_dim", w), qk_nope_head_dim=_req(c, "qk_nope_head_dim", w),
            q_lora_rank=int(c.get("q_lora_rank") or 0), layer_kinds=("full",) * n), quant_d)
    kinds = _layer_kinds(c, n, family, model_type)
    swa = c.get("sliding_window") if "swa" in kinds else None
    return _with_weights(ModelSpec(**common, num_kv_heads=kv_heads, head_dim=head_dim, v_head_dim=head_dim,
                                   layer_kinds=kinds, sliding_window=int(swa) if swa else None,
                                   linear=_linear(c, family)), quant_d)


def _with_weights(spec: ModelSpec, quant: dict[str, Any] | None) -> ModelSpec:
    """Fill weight_bytes (the whole checkpoint) from the tensors config.json implies, when no checkpoint size is
    known (say so)."""
    if spec.weight_bytes is not None:
        return spec
    from dataclasses import replace

    from kvplan.models.weights import estimate_weight_bytes

    try:
        est = estimate_weight_bytes(spec, quant)
    except KvplanError:
        return spec
    fmt = (quant or {}).get("quant_method") or spec.dtype
    return replace(spec, weight_bytes=est, weight_bytes_source=(
        f"estimated from config.json ({spec.param_count / 1e9:,.1f} B params, {fmt}; no safetensors index)"))


def read_config_file(path: str | Path) -> tuple[dict[str, Any], Path]:
    """Load config.json from a file or a checkpoint directory. Returns (dict, file path)."""
    from kvplan import validate

    p = Path(os.path.expanduser(validate.path("config.json", str(path))))
    try:
        if p.is_dir():
            p = p / "config.json"
        found = p.is_file()
    except OSError as e:
        raise KvplanError(f"{p}: cannot read ({e.strerror})") from None
    if not found:
        raise KvplanError(f"no config.json at {p}", "pass a config.json file or a checkpoint directory")
    try:
        if p.stat().st_size > CONFIG_MAX_BYTES:
            raise KvplanError(f"{p}: {p.stat().st_size:,} bytes is not a config.json", "pass the model's config.json")
        raw = p.read_bytes()
    except OSError as e:
        raise KvplanError(f"{p}: cannot read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KvplanError(f"{p}: not a text file ({e.reason})") from None
    cfg = validate.json_value(text, str(p), hint="pass the model's config.json")
    if not isinstance(cfg, dict):
        raise KvplanError(f"{p}: config.json must be a JSON object, got {type(cfg).__name__}")
    return cfg, p


def checkpoint_weight_bytes(config_path: Path) -> tuple[int | None, str | None]:
    """Weight bytes of a local checkpoint: the safetensors index total_size, else the shards' file sizes."""
    d = config_path.parent
    idx = d / "model.safetensors.index.json"
    if idx.is_file():
        from kvplan import validate

        try:
            index = validate.json_value(idx.read_bytes(), str(idx))
            meta = index.get("metadata") if isinstance(index, dict) else None
            total = meta.get("total_size") if isinstance(meta, dict) else None
            if isinstance(total, int) and not isinstance(total, bool) and 0 < total < validate.MAX_BYTES:
                return total, str(idx)
        except (OSError, KvplanError):
            pass
    shards = list(d.glob("*.safetensors"))
    if shards:
        return sum(s.stat().st_size for s in shards), f"{d}/*.safetensors"
    return None, None
