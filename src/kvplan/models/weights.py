"""Checkpoint size from config.json and its quantization_config, when no safetensors index is at hand.

Arithmetic on the architecture (parameter counts per component) times the bytes each component takes in
the checkpoint's format. Used only when ``total_size`` is unknown; the plan says it is an estimate.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError
from kvplan.models.spec import ModelSpec

LINEAR = ("attention", "dense_mlp", "experts", "shared_experts")


def _ignored(patterns: list[str]) -> set[str]:
    """Components a quantization 'ignore' / 'modules_to_not_convert' list keeps in bf16."""
    text = " ".join(str(p) for p in patterns)
    out = set()
    if "self_attn" in text:
        out.add("attention")
    if "shared_expert" in text:
        out.add("shared_experts")
    if "mlp\\.(gate" in text or "mlp.gate_proj" in text or "mlp.(gate" in text:
        out.add("dense_mlp")
    return out


def bytes_per_param(quant: dict[str, Any] | None, dtype_bytes: int) -> dict[str, float]:
    """Bytes per parameter for each component under the checkpoint's quantization."""
    base = {k: float(dtype_bytes) for k in ("embedding", "lm_head", "router", *LINEAR)}
    if not quant:
        return base
    method = str(quant.get("quant_method") or "").lower()
    if method in ("fp8", "fbgemm_fp8"):
        block = quant.get("weight_block_size") or [128, 128]
        scale = 4 / (block[0] * block[1])  # one fp32 scale per block
        skip = _ignored(quant.get("modules_to_not_convert") or quant.get("ignored_layers") or [])
        return {**base, **{k: 1 + scale for k in LINEAR if k not in skip}}
    if method in ("compressed-tensors", "modelopt") or (not method and quant.get("config_groups")):
        groups: dict[str, Any] = quant.get("config_groups") or {}
        first: dict[str, Any] = next(iter(groups.values()), {})
        w = first.get("weights") or {}
        bits, gs = w.get("num_bits"), w.get("group_size")
        if not bits:
            raise KvplanError("compressed-tensors checkpoint without weights.num_bits", "pass --weights-gib")
        # packed weights + one scale per group: bf16 for int groups, fp8 (e4m3) for NVFP4's float groups
        scale = 1 if (w.get("type") == "float" and bits == 4) else 2
        per = bits / 8 + (scale / gs if gs else 0)
        skip = _ignored(quant.get("ignore") or [])
        return {**base, **{k: per for k in LINEAR if k not in skip}}
    if method == "mxfp4":  # 4-bit values + one e8m0 scale byte per 32; gpt-oss keeps attention in bf16
        skip = _ignored(quant.get("modules_to_not_convert") or []) | {"attention"}
        return {**base, **{k: 0.5 + 1 / 32 for k in LINEAR if k not in skip}}
    if method in ("awq", "gptq"):
        bits, gs = int(quant.get("bits") or quant.get("w_bit") or 4), int(quant.get("group_size") or
                                                                             quant.get("q_group_size") or 128)
        # packed weights + fp16 scale and packed zero per group (group_size -1: per output channel, negligible)
        per = bits / 8 + ((2 + bits / 8) / gs if gs > 0 else 0.0)
        return {**base, **{k: per for k in LINEAR}}
    raise KvplanError(f"weight size of a {method!r} checkpoint cannot be derived from its config",
                      "pass --weights-gib (per rank) or a checkpoint directory with its safetensors index")


def estimate_weight_bytes(spec: ModelSpec, quant: dict[str, Any] | None) -> int:
    bpp = bytes_per_param(quant, spec.dtype_bytes)
    return int(sum(n * bpp[k] for k, n in spec.param_breakdown().items()))


def weights_per_rank(model: ModelSpec, tp: int, pp: int = 1, attn_tp: int | None = None,
                     override_gib: float | None = None) -> tuple[int, str]:
    """Weight bytes on one rank: the checkpoint split over TP × PP; attention weights split only over the
    attention-TP group (SGLang DP attention replicates them across DP groups)."""
    from kvplan.units import GiB

    if override_gib is not None:
        if override_gib < 0:
            raise KvplanError(f"--weights-gib must be >= 0, got {override_gib}")
        return int(override_gib * GiB), "--weights-gib (per rank)"
    total, src = model.weight_bytes, model.weight_bytes_source or "checkpoint"
    if total is None:
        raise KvplanError(f"{model.name}: weight size of a {model.quant_method or model.dtype} checkpoint is unknown",
                          "pass --weights-gib (per rank) or a checkpoint directory with its safetensors index")
    if model.num_nextn_predict_layers and not src.startswith("estimated"):
        # MTP/NextN layers ship in the checkpoint but are loaded only for speculative decoding.
        total -= int(total * model.num_nextn_predict_layers / (model.num_layers + model.num_nextn_predict_layers))
        src += ", minus NextN layers"
    attn = model.attention_weight_fraction
    per_rank = (total * attn / (attn_tp or tp) + total * (1 - attn) / tp) / pp
    return int(per_rank), src


def checkpoint_weights(model, tp: int, pp: int, attn_tp: int | None = None) -> int | None:
    """Weights per rank from the checkpoint alone (no override), or None when unknown: what a log's
    weight figure is compared with."""
    try:
        return weights_per_rank(model, tp, pp, attn_tp)[0]
    except KvplanError:
        return None
