"""The placement of each tensor role under an engine's parallel layout (the layer classes both engines share).

``Layout`` carries the group sizes an engine derives from its flags: attention TP (SGLang DP attention divides
it), dense-MLP TP, MoE TP and EP, the vocab-parallel groups of the embedding and the LM head, the vocab padding
(``pad_vocab_size``, 64) and the head counts that decide KV-head replication (``QKVParallelLinear``:
``num_kv_heads_per_rank = max(1, total_kv_heads // tp)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvplan.models.roles import Role, classify
from kvplan.models.sharding import Placement, cdiv, split_axis
from kvplan.models.tensors import TensorGroup


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    attn_tp: int = 1
    mlp_tp: int = 1
    shared_tp: int = 1
    moe_tp: int = 1
    ep: int = 1
    embed_tp: int = 1
    head_tp: int = 1
    vision_tp: int = 1
    vocab_pad: int = 64
    num_heads: int = 1
    num_kv_heads: int = 1
    n_layers: int = 1  # decoder layers the engine builds (MTP/NextN layers beyond are not loaded)


_ROLES: dict[tuple[str, int], Role] = {}


def role_of(g: TensorGroup) -> Role:
    key = (g.template, len(g.shape))
    r = _ROLES.get(key)
    if r is None:
        r = _ROLES[key] = classify(g.template, len(g.shape))
    return r


def _ways(lay: Layout, group: str) -> int:
    return {"attention": lay.attn_tp, "linear_attn": lay.attn_tp, "mlp": lay.mlp_tp,
            "shared_experts": lay.shared_tp, "vision": lay.vision_tp, "mtp": lay.tp}.get(group, lay.tp)


def place(g: TensorGroup, lay: Layout, kind: str | None = None, part: str | None = None) -> Placement | None:
    """Placement of ``g`` under ``lay``; ``kind``/``part`` override the role's (engine-specific rules)."""
    role = role_of(g)
    kind, part = kind or role.kind, part or role.group
    if kind == "drop" or (g.layer is not None and g.layer >= lay.n_layers):
        return None
    leaf = g.template.rsplit(".", 1)[-1]
    if g.layer is not None:
        stage = "layer"
    elif kind in ("embed", "pos_embed") or "embed" in g.template:
        stage = "first"
    elif kind == "lm_head" or part in ("norms",):
        stage = "last"
    else:
        stage = "all"
    if kind == "embed":
        return Placement(part, 0, lay.embed_tp, lay.vocab_pad, stage=stage)
    if kind == "lm_head":
        return Placement(part, 0, lay.head_tp, lay.vocab_pad, stage=stage)
    if kind in ("col", "row", "q"):
        par = "row" if kind == "row" else "col"
        return Placement(part, split_axis(leaf, g.shape, par), _ways(lay, part), stage=stage)
    if kind == "kv":
        ways = min(_ways(lay, part), lay.num_kv_heads) if part == "attention" else _ways(lay, part)
        return Placement(part, split_axis(leaf, g.shape, "col"), ways, stage=stage)
    if kind == "qkv":
        t = _ways(lay, part)
        if part != "attention" or lay.num_kv_heads == lay.num_heads:
            return Placement(part, split_axis(leaf, g.shape, "col"), t, stage=stage)
        if split_axis(leaf, g.shape, "col") is None:
            return Placement(part, stage=stage)
        nq, nkv = lay.num_heads, lay.num_kv_heads
        kvr = max(1, nkv // t)
        return Placement(part, fraction=(nq // t + 2 * kvr, nq + 2 * nkv), stage=stage)
    if kind == "heads":
        return Placement(part, 0, _ways(lay, part), stage=stage)
    if kind in ("expert_col", "expert_row"):
        par = "row" if kind == "expert_row" else "col"
        return Placement(part, split_axis(leaf, g.shape, par), lay.moe_tp, per_rank_count=cdiv(g.count, lay.ep),
                         stage=stage)
    if kind in ("fused_expert_col", "fused_expert_row"):
        if lay.ep > 1 and lay.moe_tp == 1:
            return Placement(part, 0, lay.ep, stage=stage)
        if lay.ep > 1:
            return Placement(part, fraction=(1, lay.ep * lay.moe_tp), stage=stage)
        return Placement(part, _fused_axis(leaf, g.shape, kind), lay.moe_tp, stage=stage)
    return Placement(part, stage=stage)  # embed positions, norms, routers, replicated linears


def _fused_axis(leaf: str, shape: tuple[int, ...], kind: str) -> int | None:
    """gpt-oss fused experts: blocks/scales [E, out, in/32(, 16)], biases [E, out]; bf16 gate_up_proj [E, H, 2I],
    down_proj [E, I, H] (transformers GptOssExperts)."""
    if leaf in ("gate_up_proj", "down_proj"):
        return 2 if leaf == "gate_up_proj" else 1
    if kind == "fused_expert_col":
        return 1
    return None if leaf.endswith("_bias") else 2


Placer = Callable[[TensorGroup], Placement | None]


def placer(lay: Layout, rule: Callable[[TensorGroup, Role], tuple[str | None, str | None]] | None = None) -> Placer:
    """A placement function; ``rule(group, role)`` may return an engine-specific (kind, part) override, decided
    from the group's template and role (never its layer number). A placement depends on the group's template,
    shape, dtype and count and on whether it has a layer below ``lay.n_layers``: groups alike in those (the same
    tensor in every layer) are placed once per placer."""
    memo: dict[tuple, Placement | None] = {}

    def f(g: TensorGroup) -> Placement | None:
        key = (g.template, g.shape, g.dtype, g.count, g.layer is None, g.layer is not None and g.layer >= lay.n_layers)
        if key in memo:
            return memo[key]
        if rule is None:
            p = place(g, lay)
        else:
            kind, part = rule(g, role_of(g))
            p = place(g, lay, kind, part)
        memo[key] = p
        return p
    return f
