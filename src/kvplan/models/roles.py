"""What a checkpoint tensor is, from its Hugging Face name: the role decides how an engine shards it.

Both engines map checkpoint names onto the same few layer classes (vLLM and SGLang ``layers/linear.py``,
``layers/vocab_parallel_embedding.py``, ``layers/moe``): ``VocabParallelEmbedding`` / ``ParallelLMHead``
(rows split over TP), ``ColumnParallelLinear`` / ``MergedColumnParallelLinear`` (output rows split),
``QKVParallelLinear`` (heads split, KV heads replicated when TP > KV heads), ``RowParallelLinear`` (input
columns split), ``ReplicatedLinear`` and norms (whole on every rank), ``FusedMoE`` (experts split over EP, each
expert's intermediate dim over the MoE-TP group). Engines differ only in a few tensors (see
``engines/<engine>/weights.py``).

Kinds: embed, lm_head, pos_embed, norm, replicated, col, row, q, kv, qkv, heads (split along axis 0 by heads),
expert_col, expert_row (one tensor per expert), fused_expert_col, fused_expert_row (all experts in one tensor,
axis 0 = expert), drop (not loaded).
Groups (``WeightsEstimate.parts``): embedding, lm_head, attention, mlp, shared_experts, experts, router, norms,
linear_attn, vision, projector, mtp.
"""

from __future__ import annotations

from dataclasses import dataclass

VISION_MARKS = ("vision_tower", "visual.", "vision_model", "vision_encoder", "vit.", "image_encoder")
PROJECTOR_MARKS = ("mm_projector", "multi_modal_projector", "visual.merger", "mlp1.", "aligner")
QKV = ("qkv_proj", "query_key_value", "c_attn", "wqkv", "W_pack", "Wqkv", "in_proj_qkv")
OUT = ("o_proj", "out_proj", "wo", "dense", "c_proj", "proj")
UP = ("gate_proj", "up_proj", "w1", "w3", "fc1", "c_fc", "dense_h_to_4h", "gate_up_proj", "fc0", "fc_in", "c_fc_0",
      "c_fc_1")
DOWN = ("down_proj", "w2", "fc2", "dense_4h_to_h", "fc_out")
NORM_MARKS = ("norm", "ln_", "ln1", "ln2", "layer_norm", "layernorm", "ln_f", "final_layernorm")
ATTN_MARKS = ("self_attn", "attention", "attn", "self_attention")


@dataclass(frozen=True, slots=True)
class Role:
    kind: str
    group: str
    module: str  # the module path part of the name (what an ignore list names), e.g. "model.layers.{L}.mlp.gate"


def _parts(template: str) -> tuple[list[str], str]:
    parts = template.split(".")
    return parts, parts[-1]


def classify(template: str, ndim: int) -> Role:
    """The role of a tensor named ``template`` (numbers as in ``tensors.TensorGroup``)."""
    parts, leaf = _parts(template)
    module = ".".join(parts[:-1])
    low = template.lower()
    in_vision = any(m in template for m in VISION_MARKS)
    in_proj = any(m in template for m in PROJECTOR_MARKS)
    names = set(parts)
    last = parts[-2] if len(parts) > 1 else leaf
    if "rotary_emb" in names or leaf == "inv_freq":
        return Role("drop", "other", module)
    if in_proj and not in_vision:
        return Role("replicated", "projector", module)
    if in_vision or in_proj:
        return Role(_linear_kind(parts, last, leaf, ndim, template) or "replicated", "vision", module)
    if last in ("embed_tokens", "wte", "word_embeddings", "embed_in", "tok_embeddings") or template.endswith(
            "embedding.weight") and "layers" not in names:
        return Role("embed", "embedding", module)
    if last in ("lm_head", "embed_out", "output") or template.endswith("shared_head.head.weight"):
        return Role("lm_head", "lm_head", module)
    if last in ("wpe", "embed_positions", "position_embeddings"):
        return Role("pos_embed", "embedding", module)
    if any(m in last.lower() for m in NORM_MARKS) and "proj" not in last:
        return Role("norm", "norms", module)
    # --- MoE --------------------------------------------------------------------------------------------
    if "experts" in names and "shared_experts" not in names:
        if last == "experts":  # all experts in one tensor (gpt-oss): experts.gate_up_proj_blocks, ...
            up = leaf.startswith(("gate_up_proj", "w13", "w1", "gate_proj", "up_proj"))
            return Role("fused_expert_col" if up else "fused_expert_row", "experts", module)
        kind = _linear_kind(parts, last, leaf, ndim, template)
        return Role("expert_row" if kind == "row" else "expert_col", "experts", module)
    if last in ("gate", "router") and ("mlp" in names or "block_sparse_moe" in names or "moe" in names) \
            or leaf == "e_score_correction_bias" or last == "shared_expert_gate":
        return Role("replicated", "router", module)
    if "shared_experts" in names or "shared_expert" in names:
        return Role(_linear_kind(parts, last, leaf, ndim, template) or "replicated", "shared_experts", module)
    # --- linear attention (Qwen3-Next gated delta net) ----------------------------------------------------
    if "linear_attn" in names:
        if last in ("in_proj_qkvz", "in_proj_ba", "conv1d"):
            return Role("col", "linear_attn", module)
        if leaf in ("A_log", "dt_bias"):
            return Role("heads", "linear_attn", module)
        if last == "out_proj":
            return Role("row", "linear_attn", module)
        return Role("replicated", "linear_attn", module)
    # --- attention -----------------------------------------------------------------------------------------
    if names & set(ATTN_MARKS) or "mixer" in names:
        if last in ("q_a_proj", "kv_a_proj_with_mqa", "fused_qkv_a_proj_with_mqa"):
            return Role("replicated", "attention", module)  # MLA down-projections: ReplicatedLinear
        if leaf == "sinks" or last == "sinks":
            return Role("heads", "attention", module)
        kind = _linear_kind(parts, last, leaf, ndim, template)
        return Role(kind or "replicated", "attention", module)
    # --- dense MLP -----------------------------------------------------------------------------------------
    kind = _linear_kind(parts, last, leaf, ndim, template)
    if kind in ("col", "row"):
        return Role(kind, "mlp", module)
    if "mtp" in low or "eh_proj" in names or "enorm" in names or "hnorm" in names:
        return Role("replicated", "mtp", module)
    return Role("replicated", "other", module)


def _linear_kind(parts: list[str], last: str, leaf: str, ndim: int, template: str) -> str | None:
    if last in QKV:
        return "qkv"
    if last in ("q_proj", "q_b_proj", "query", "wq"):
        return "q"
    if last in ("k_proj", "v_proj", "key", "value", "wk", "wv"):
        return "kv"
    if last in ("kv_b_proj",):
        return "col"
    if last in UP:
        return "col"
    if last in DOWN:
        return "row"
    if last in OUT:
        return "row"
    return None
