"""The numbers of a config.json, checked before any arithmetic (kvplan.validate): one function,
:func:`check_config_numbers`, called by ``models.config`` once the text part, aliases and transformers' defaults
are resolved.

Every field kvplan reads must be a finite number of the right kind and a sane magnitude; a present field is never
silently replaced by a default (``num_key_value_heads: 0`` is an error, not "use the attention heads"). Bounds:

* ``num_hidden_layers`` 1..10,000 (the largest released models have < 200 layers);
* heads, head dims, KV heads, LoRA ranks >= 1 (and <= 65,536); ``num_key_value_heads`` <= attention heads;
* ``hidden_size`` 1..2^20; ``intermediate_size`` (and MoE widths) 0..2^24; ``vocab_size`` 1..2^26;
* length keys (``max_position_embeddings`` ...) 1..2^31; ``sliding_window`` 0..2^31 (0 and null mean no window:
  transformers' Qwen2-MoE config writes 0 when ``use_sliding_window`` is off); RoPE ``factor`` in (0, 10^4];
* ``first_k_dense_replace`` <= layers; experts 0..65,536, ``num_experts_per_tok`` <= experts;
* without ``head_dim``, the head size is ``hidden_size // num_attention_heads`` (transformers' default for these
  architectures), so the heads must divide the hidden size (and never exceed it).
"""

from __future__ import annotations

from typing import Any

from kvplan import validate as v
from kvplan.errors import KvplanError

HINT = "pass the checkpoint's original config.json with --model-config"
WIDE = 1 << 16
# key -> (lowest, highest) for whole numbers that may be absent or null
_COUNTS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, v.MAX_LAYERS), "hidden_size": (1, 1 << 20), "num_attention_heads": (1, WIDE),
    "num_key_value_heads": (1, WIDE), "num_kv_heads": (1, WIDE), "head_dim": (1, WIDE), "vocab_size": (1, 1 << 26),
    "intermediate_size": (0, 1 << 24), "moe_intermediate_size": (0, 1 << 24),
    "shared_expert_intermediate_size": (0, 1 << 24), "n_routed_experts": (0, WIDE), "num_experts": (0, WIDE),
    "num_local_experts": (0, WIDE), "num_experts_per_tok": (0, WIDE), "n_shared_experts": (0, 1024),
    "first_k_dense_replace": (0, v.MAX_LAYERS), "kv_lora_rank": (1, WIDE), "qk_rope_head_dim": (1, WIDE),
    "qk_nope_head_dim": (1, WIDE), "v_head_dim": (1, WIDE), "q_lora_rank": (0, WIDE),
    "sliding_window": (0, v.MAX_TOKENS), "max_window_layers": (0, v.MAX_LAYERS),
    "full_attention_interval": (1, v.MAX_LAYERS), "sliding_window_pattern": (1, v.MAX_LAYERS),
    "_sliding_window_pattern": (1, v.MAX_LAYERS), "num_nextn_predict_layers": (0, 1024),
    "linear_num_key_heads": (1, WIDE), "linear_num_value_heads": (1, WIDE), "linear_key_head_dim": (1, WIDE),
    "linear_value_head_dim": (1, WIDE), "linear_conv_kernel_dim": (1, 1024),
}
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
               "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")


def _whole(name: str, key: str, value: Any, lo: int, hi: int) -> int:
    return v.count(f"{name}: config.json {key}", value, lo, hi, HINT)


def check_config_numbers(c: dict[str, Any], top: dict[str, Any], family: str, name: str) -> None:
    """Raise KvplanError naming the field and the value when a number kvplan reads from config.json is not sane.

    *c* is the text-model part after aliases and defaults, *top* the whole config, *family* the KV family
    (``mha``, ``mla``, ``gdn``)."""
    got: dict[str, int] = {}
    for key, (lo, hi) in _COUNTS.items():
        if c.get(key) is not None:
            got[key] = _whole(name, key, c[key], lo, hi)
    for part in (c, top):
        for key in LENGTH_KEYS:
            if isinstance(part.get(key), (int, float)) and not isinstance(part.get(key), bool):
                _whole(name, key, part[key], 1, v.MAX_TOKENS)
    layers = got.get("num_hidden_layers")
    heads = got.get("num_attention_heads")
    if layers is not None and got.get("first_k_dense_replace", 0) > layers:
        raise KvplanError(f"{name}: config.json first_k_dense_replace {got['first_k_dense_replace']} exceeds "
                          f"num_hidden_layers {layers}", HINT)
    if heads is not None and got.get("num_key_value_heads", 1) > heads and family != "mla":
        raise KvplanError(f"{name}: config.json num_key_value_heads {got['num_key_value_heads']} exceeds "
                          f"num_attention_heads {heads}", HINT)
    experts = max(got.get(k, 0) for k in ("n_routed_experts", "num_experts", "num_local_experts"))
    if experts and got.get("num_experts_per_tok", 1) > experts:
        raise KvplanError(f"{name}: config.json num_experts_per_tok {got['num_experts_per_tok']} exceeds the "
                          f"{experts} experts", HINT)
    hidden = got.get("hidden_size")
    if family != "mla" and got.get("head_dim") is None and hidden is not None and heads is not None \
            and hidden % heads:
        raise KvplanError(f"{name}: config.json hidden_size {hidden} is not divisible by num_attention_heads "
                          f"{heads} (without head_dim the head size is hidden_size / num_attention_heads)", HINT)
    for part in (c, top):
        rope = part.get("rope_scaling") or part.get("rope_parameters")
        if isinstance(rope, dict):
            for rp in [rope, *[x for x in rope.values() if isinstance(x, dict)]]:
                if rp.get("factor") is not None:
                    v.number(f"{name}: config.json rope_scaling factor", rp["factor"], lo=0.0, hi=1e4,
                             lo_open=True, hint=HINT)
    quant = top.get("quantization_config") or c.get("quantization_config")
    if isinstance(quant, dict):
        _check_quant(quant, name)
    vision = top.get("vision_config")
    if isinstance(vision, dict):
        for key, hi in (("num_hidden_layers", v.MAX_LAYERS), ("depth", v.MAX_LAYERS), ("hidden_size", 1 << 20)):
            if vision.get(key) is not None:
                _whole(name, f"vision_config.{key}", vision[key], 0, hi)


def check_context_len(ctx: int, name: str) -> None:
    """The context length derived from the length keys and the RoPE factor: at most 2^31 tokens."""
    v.count(f"{name}: context length derived from config.json", ctx, 1, v.MAX_TOKENS, HINT)


def _check_quant(quant: dict[str, Any], name: str) -> None:
    """The numbers the weight estimate reads from quantization_config."""
    where = f"{name}: config.json quantization_config"
    block = quant.get("weight_block_size")
    if block is not None:
        if not isinstance(block, list) or len(block) != 2:
            raise KvplanError(f"{where}.weight_block_size must be a list of two sizes, got {block!r}"[:200], HINT)
        for b in block:
            v.count(f"{where}.weight_block_size", b, 1, WIDE, HINT)
    for key in ("bits", "w_bit"):
        if quant.get(key) is not None:
            v.count(f"{where}.{key}", quant[key], 1, 64, HINT)
    for key in ("group_size", "q_group_size"):  # -1: one group per output channel (GPTQ)
        if quant.get(key) is not None and quant[key] != -1:
            v.count(f"{where}.{key}", quant[key], 1, 1 << 24, HINT)
    groups = quant.get("config_groups")
    if isinstance(groups, dict):
        for g in groups.values():
            w = g.get("weights") if isinstance(g, dict) else None
            if isinstance(w, dict):
                if w.get("num_bits") is not None:
                    v.count(f"{where}.config_groups.weights.num_bits", w["num_bits"], 1, 64, HINT)
                if w.get("group_size") is not None:
                    v.count(f"{where}.config_groups.weights.group_size", w["group_size"], 1, 1 << 24, HINT)
