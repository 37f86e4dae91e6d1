"""Pieces shared by both engines' weight rules: the platform of a GPU name, which role groups hold linear
layers, and the INT4-MoE index tensors the ROCm (Triton) paths keep."""

from __future__ import annotations

from kvplan.models.placement import Layout, role_of
from kvplan.models.sharding import cdiv

LINEAR_GROUPS = ("attention", "mlp", "shared_experts", "experts", "linear_attn")


def platform_of(gpu_name: str | None) -> str:
    """"rocm" for AMD Instinct / Radeon names, "cpu" for the CPU build, else "cuda"."""
    n = (gpu_name or "").lower()
    if "amd" in n or "instinct" in n or n.startswith("mi") or "radeon" in n:
        return "rocm"
    return "cpu" if n.startswith("cpu") else "cuda"


def wna16_g_idx_bytes(groups, lay: Layout, layers: range, fused: int) -> int:
    """ROCm keeps w13/w2 g_idx and sort indices (int32 [E_local, H] ×2, [E_local, I_local] ×2) per MoE layer."""
    total = 0
    for g in groups:
        if g.layer in layers and role_of(g).kind == "expert_col" and g.template.endswith(
                ("gate_proj.weight_packed", "w1.weight_packed")):
            e_local = cdiv(g.count + fused, lay.ep)
            h = g.shape[1] * 8  # weight_packed [I, H/8] (4-bit)
            i_local = g.shape[0] // lay.moe_tp
            total += e_local * (2 * h + 2 * i_local) * 4
    return total
