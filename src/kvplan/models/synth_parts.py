"""The building blocks of checkpoint synthesis (``models.synth``): the tensor-group builder, the config readers
and the Llama-like decoder layers every family module composes."""

from __future__ import annotations

from typing import Any

from kvplan.models.quantfmt import NONE, QuantScheme
from kvplan.models.tensors import TensorGroup

TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3", "gemma3_text")  # transformers configs default tie=True


class Builder:
    """Collects TensorGroups; ``lin`` writes one linear layer in the checkpoint's format."""

    def __init__(self, scheme: QuantScheme, dtype: str, prefix: str = ""):
        self.scheme, self.dtype, self.prefix = scheme, dtype, prefix
        self.groups: list[TensorGroup] = []
        # a linear's format is the same in every layer (names are templates, the layer is {L}): looked up once
        self._formats: dict[tuple[str, bool], Any] = {}

    def raw(self, name: str, shape: tuple[int, ...], layer: int | None = None, dtype: str | None = None,
            count: int = 1) -> None:
        self.groups.append(TensorGroup(self.prefix + name, tuple(int(x) for x in shape), dtype or self.dtype,
                                       layer, count))

    def lin(self, name: str, out: int, inp: int, layer: int | None = None, bias: bool = False,
            quant: bool = True, count: int = 1, expert: bool = False) -> None:
        if quant:
            key = (self.prefix + name, expert)
            fmt = self._formats.get(key)
            if fmt is None:
                fmt = self._formats[key] = self.scheme.format_for(self.prefix + name, expert)
        else:
            fmt = NONE
        for suffix, shape, dt in fmt.tensors(int(out), int(inp), self.dtype):
            self.raw(f"{name}.{suffix}", shape, layer, dt, count)
        if bias:
            self.raw(f"{name}.bias", (out,), layer, count=count)


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    for key in ("text_config", "language_config", "llm_config"):
        sub = cfg.get(key)
        if isinstance(sub, dict) and sub.get("num_hidden_layers"):
            return sub
    return cfg


def quant_config_of(cfg: dict[str, Any]) -> dict[str, Any] | None:
    q = cfg.get("quantization_config") or text_config(cfg).get("quantization_config")
    return q if isinstance(q, dict) else None


def tied(spec, c: dict[str, Any], top: dict[str, Any]) -> bool:
    for d in (c, top):
        if isinstance(d.get("tie_word_embeddings"), bool):
            return bool(d["tie_word_embeddings"])
    return spec.model_type in TIED_BY_DEFAULT or bool(spec.tie_word_embeddings)


def _moe_layers(spec, c: dict[str, Any]) -> set[int]:
    """Decoder layers that are MoE (transformers' Qwen2/3-MoE decoder_sparse_step + mlp_only_layers, DeepSeek/GLM
    first_k_dense_replace + moe_layer_freq)."""
    if spec.moe is None:
        return set()
    n = spec.num_layers
    if "decoder_sparse_step" in c or "mlp_only_layers" in c:
        step = int(c.get("decoder_sparse_step") or 1)
        only = set(c.get("mlp_only_layers") or [])
        return {i for i in range(n) if i not in only and (i + 1) % step == 0}
    first = int(c.get("first_k_dense_replace") or 0)
    freq = c.get("moe_layer_freq", 1)
    freq = int(freq) if isinstance(freq, int) and freq > 0 else 1
    return {i for i in range(first, n) if i % freq == 0}


def _attention(b: Builder, spec, c: dict[str, Any], mt: str, pre: str, i: int) -> None:
    h, nq, nkv, hd = spec.hidden_size, spec.num_attention_heads, spec.num_kv_heads, spec.head_dim
    arch = spec.architecture
    qkv_bias = bool(c.get("attention_bias") or c.get("qkv_bias") or c.get("use_bias") or c.get("bias")) or \
        mt.startswith(("qwen2", "gpt_oss"))
    o_bias = mt in ("gpt_oss", "starcoder2") and qkv_bias or bool(c.get("use_bias") and mt != "qwen2")
    q_out = nq * hd * (2 if mt == "qwen3_next" else 1)  # Qwen3-Next: gated attention output (q and gate)
    if arch == "Phi3ForCausalLM":
        b.lin(f"{pre}.self_attn.qkv_proj", (nq + 2 * nkv) * hd, h, i)
    elif arch == "InternLM2ForCausalLM":
        b.lin(f"{pre}.attention.wqkv", (nq + 2 * nkv) * hd, h, i, bias=qkv_bias)
        b.lin(f"{pre}.attention.wo", h, nq * hd, i, bias=qkv_bias)
        return
    else:
        b.lin(f"{pre}.self_attn.q_proj", q_out, h, i, bias=qkv_bias)
        b.lin(f"{pre}.self_attn.k_proj", nkv * hd, h, i, bias=qkv_bias)
        b.lin(f"{pre}.self_attn.v_proj", nkv * hd, h, i, bias=qkv_bias)
    b.lin(f"{pre}.self_attn.o_proj", h, nq * hd, i, bias=o_bias)
    if mt in ("qwen3", "qwen3_moe", "qwen3_next", "gemma3", "gemma3_text") or c.get("use_qk_norm"):
        b.raw(f"{pre}.self_attn.q_norm.weight", (hd,), i)
        b.raw(f"{pre}.self_attn.k_norm.weight", (hd,), i)
    elif mt == "olmo2":
        b.raw(f"{pre}.self_attn.q_norm.weight", (nq * hd,), i)
        b.raw(f"{pre}.self_attn.k_norm.weight", (nkv * hd,), i)
    if mt == "gpt_oss":
        b.raw(f"{pre}.self_attn.sinks", (nq,), i)


def _mlp(b: Builder, spec, pre: str, i: int, inter: int, gated: bool = True, fused: bool = False,
         bias: bool = False, name: str = "mlp") -> None:
    h = spec.hidden_size
    if not gated:
        b.lin(f"{pre}.{name}.c_fc", inter, h, i, bias=bias)
        b.lin(f"{pre}.{name}.c_proj", h, inter, i, bias=bias)
        return
    if fused:
        b.lin(f"{pre}.{name}.gate_up_proj", 2 * inter, h, i)
    else:
        b.lin(f"{pre}.{name}.gate_proj", inter, h, i, bias=bias)
        b.lin(f"{pre}.{name}.up_proj", inter, h, i, bias=bias)
    b.lin(f"{pre}.{name}.down_proj", h, inter, i, bias=bias)


def _moe(b: Builder, spec, c: dict[str, Any], mt: str, pre: str, i: int) -> None:
    m, h = spec.moe, spec.hidden_size
    e, mi = m.num_experts, m.moe_intermediate_size
    if mt == "mixtral":
        b.raw(f"{pre}.block_sparse_moe.gate.weight", (e, h), i)
        for w, (o, n) in (("w1", (mi, h)), ("w3", (mi, h)), ("w2", (h, mi))):
            b.lin(f"{pre}.block_sparse_moe.experts.#.{w}", o, n, i, count=e, expert=True)
        return
    if mt == "gpt_oss":  # fused experts, mxfp4 blocks of 32 (16 bytes) + one e8m0 scale each; bf16 biases
        b.raw(f"{pre}.mlp.router.weight", (e, h), i)
        b.raw(f"{pre}.mlp.router.bias", (e,), i)
        x = f"{pre}.mlp.experts"
        if b.scheme.method == "mxfp4":
            b.raw(f"{x}.gate_up_proj_blocks", (e, 2 * mi, h // 32, 16), i, "U8")
            b.raw(f"{x}.gate_up_proj_scales", (e, 2 * mi, h // 32), i, "U8")
            b.raw(f"{x}.down_proj_blocks", (e, h, mi // 32, 16), i, "U8")
            b.raw(f"{x}.down_proj_scales", (e, h, mi // 32), i, "U8")
        else:
            b.raw(f"{x}.gate_up_proj", (e, h, 2 * mi), i)
            b.raw(f"{x}.down_proj", (e, mi, h), i)
        b.raw(f"{x}.gate_up_proj_bias", (e, 2 * mi), i)
        b.raw(f"{x}.down_proj_bias", (e, h), i)
        return
    b.raw(f"{pre}.mlp.gate.weight", (e, h), i)
    if mt in ("glm4_moe",):
        b.raw(f"{pre}.mlp.gate.e_score_correction_bias", (e,), i, "F32")
    for w, (o, n) in (("gate_proj", (mi, h)), ("up_proj", (mi, h)), ("down_proj", (h, mi))):
        b.lin(f"{pre}.mlp.experts.#.{w}", o, n, i, count=e, expert=True)
    if m.shared_intermediate_size:
        if mt in ("glm4_moe",):
            _mlp(b, spec, pre, i, m.shared_intermediate_size, name="mlp.shared_experts")
        else:  # Qwen2-MoE / Qwen3-Next: one shared expert with a sigmoid gate
            _mlp(b, spec, pre, i, m.shared_intermediate_size, name="mlp.shared_expert")
            b.raw(f"{pre}.mlp.shared_expert_gate.weight", (1, h), i)


def _linear_attn(b: Builder, spec, pre: str, i: int) -> None:
    """Qwen3-Next gated delta net (transformers modeling_qwen3_next.py::Qwen3NextGatedDeltaNet)."""
    lin, h, c = spec.linear, spec.hidden_size, f"{pre}.linear_attn"
    nv, (dk, dv) = lin.num_heads, lin.state_dims
    nk = (lin.conv_dim - nv * dv) // (2 * dk)
    b.lin(f"{c}.in_proj_qkvz", 2 * nk * dk + 2 * nv * dv, h, i)
    b.lin(f"{c}.in_proj_ba", 2 * nv, h, i)
    b.raw(f"{c}.conv1d.weight", (lin.conv_dim, 1, lin.conv_kernel), i)
    b.raw(f"{c}.dt_bias", (nv,), i)
    b.raw(f"{c}.A_log", (nv,), i)
    b.raw(f"{c}.norm.weight", (dv,), i)
    b.lin(f"{c}.out_proj", h, nv * dv, i)


def _norms(b: Builder, mt: str, pre: str, i: int, h: int, bias: bool) -> None:
    names = {"gemma2": ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                        "post_feedforward_layernorm"),
             "glm4": ("input_layernorm", "post_self_attn_layernorm", "post_attention_layernorm", "post_mlp_layernorm"),
             "olmo2": ("post_attention_layernorm", "post_feedforward_layernorm"),
             "cohere": ("input_layernorm",), "olmo": ()}
    names["gemma3"] = names["gemma3_text"] = names["gemma2"]
    for n in names.get(mt, ("input_layernorm", "post_attention_layernorm")):
        b.raw(f"{pre}.{n}.weight", (h,), i)
        if bias:
            b.raw(f"{pre}.{n}.bias", (h,), i)


def _decoder(b: Builder, spec, c: dict[str, Any], top: dict[str, Any]) -> None:
    mt, arch, h, n = spec.model_type, spec.architecture, spec.hidden_size, spec.num_layers
    internlm = arch == "InternLM2ForCausalLM"
    b.raw("model.tok_embeddings.weight" if internlm else "model.embed_tokens.weight", (spec.vocab_size, h))
    moe = _moe_layers(spec, c)
    ln_bias = mt == "starcoder2"
    for i in range(n):
        pre = "model.layers.{L}"
        if spec.layer_kinds[i] == "linear":
            _linear_attn(b, spec, pre, i)
        else:
            _attention(b, spec, c, mt, pre, i)
        if i in moe:
            _moe(b, spec, c, mt, pre, i)
        elif internlm:
            _mlp(b, spec, pre, i, spec.intermediate_size, name="feed_forward")
        else:
            _mlp(b, spec, pre, i, spec.intermediate_size, gated=mt != "starcoder2",
                 fused=arch in ("Phi3ForCausalLM", "Glm4ForCausalLM"), bias=mt == "starcoder2")
        if internlm:
            b.raw(f"{pre}.attention_norm.weight", (h,), i)
            b.raw(f"{pre}.ffn_norm.weight", (h,), i)
        else:
            _norms(b, mt, pre, i, h, ln_bias)
    b.raw("model.norm.weight", (h,))
    if ln_bias:
        b.raw("model.norm.bias", (h,))
    if not tied(spec, c, top):
        b.raw("output.weight" if internlm else "lm_head.weight", (spec.vocab_size, h))
