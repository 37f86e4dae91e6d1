"""DeepSeek-V2/V3-architecture checkpoints (DeepSeek-V2/V3/R1, Kimi-K2/K2.5, Kimi-VL): MLA attention, MoE.

Tensor names and shapes as in the released checkpoints and transformers ``modeling_deepseek_v3.py``
(``DeepseekV3Attention``: q_a_proj / q_a_layernorm / q_b_proj or q_proj, kv_a_proj_with_mqa, kv_a_layernorm,
kv_b_proj, o_proj; ``DeepseekV3MoE``: gate.weight [+ e_score_correction_bias when topk_method is noaux_tc],
experts.E.{gate,up,down}_proj, shared_experts with n_shared_experts × moe_intermediate_size). MTP/NextN layers
(``num_nextn_predict_layers``) follow the decoder stack at index num_hidden_layers.. and add enorm, hnorm,
eh_proj [H, 2H], shared_head.norm and shared_head.head (DeepSeek-V3 checkpoint layout).
"""

from __future__ import annotations

from typing import Any

from kvplan.models.synth_parts import Builder, _mlp, _moe_layers, tied

NOAUX_BY_DEFAULT = ("deepseek_v3", "kimi_k2", "kimi_k25", "deepseek_v32")  # HF DeepseekV3Config: "noaux_tc"


def _layer(b: Builder, spec, c: dict[str, Any], i: int, moe: bool) -> None:
    h, nh = spec.hidden_size, spec.num_attention_heads
    nope, rope, v, kvl, ql = (spec.qk_nope_head_dim, spec.qk_rope_head_dim, spec.v_head_dim, spec.kv_lora_rank,
                              spec.q_lora_rank)
    a = "model.layers.{L}.self_attn"
    if ql:
        b.lin(f"{a}.q_a_proj", ql, h, i)
        b.raw(f"{a}.q_a_layernorm.weight", (ql,), i)
        b.lin(f"{a}.q_b_proj", nh * (nope + rope), ql, i)
    else:
        b.lin(f"{a}.q_proj", nh * (nope + rope), h, i)
    b.lin(f"{a}.kv_a_proj_with_mqa", kvl + rope, h, i)
    b.raw(f"{a}.kv_a_layernorm.weight", (kvl,), i)
    b.lin(f"{a}.kv_b_proj", nh * (nope + v), kvl, i)
    b.lin(f"{a}.o_proj", h, nh * v, i)
    pre = "model.layers.{L}"
    if moe:
        m = spec.moe
        e, mi = m.num_experts, m.moe_intermediate_size
        b.raw(f"{pre}.mlp.gate.weight", (e, h), i)
        topk = c.get("topk_method") or ("noaux_tc" if spec.model_type in NOAUX_BY_DEFAULT else "greedy")
        if topk == "noaux_tc":
            b.raw(f"{pre}.mlp.gate.e_score_correction_bias", (e,), i, "F32")
        for w, (o, n) in (("gate_proj", (mi, h)), ("up_proj", (mi, h)), ("down_proj", (h, mi))):
            b.lin(f"{pre}.mlp.experts.#.{w}", o, n, i, count=e, expert=True)
        if m.shared_intermediate_size:
            _mlp(b, spec, pre, i, m.shared_intermediate_size, name="mlp.shared_experts")
    else:
        _mlp(b, spec, pre, i, spec.intermediate_size)
    b.raw(f"{pre}.input_layernorm.weight", (h,), i)
    b.raw(f"{pre}.post_attention_layernorm.weight", (h,), i)


def build(b: Builder, spec, c: dict[str, Any], top: dict[str, Any]) -> None:
    h, n = spec.hidden_size, spec.num_layers
    if top is not c:  # multimodal wrapper (Kimi-K2.5, Kimi-VL): language model under language_model.
        b.prefix = "language_model."
    b.raw("model.embed_tokens.weight", (spec.vocab_size, h))
    moe = _moe_layers(spec, c)
    for i in range(n):
        _layer(b, spec, c, i, i in moe)
    for j in range(spec.num_nextn_predict_layers):
        i = n + j
        _layer(b, spec, c, i, spec.moe is not None)
        pre = "model.layers.{L}"
        for nm in ("enorm", "hnorm", "shared_head.norm"):
            b.raw(f"{pre}.{nm}.weight", (h,), i)
        b.lin(f"{pre}.eh_proj", h, 2 * h, i, quant=False)
        b.raw(f"{pre}.embed_tokens.weight", (spec.vocab_size, h), i)
        b.raw(f"{pre}.shared_head.head.weight", (spec.vocab_size, h), i)
    b.raw("model.norm.weight", (h,))
    if not tied(spec, c, top):
        b.raw("lm_head.weight", (spec.vocab_size, h))
    b.prefix = ""
