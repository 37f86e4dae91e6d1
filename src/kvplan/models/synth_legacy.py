"""Older decoder families with their own tensor names (transformers ``modeling_<type>.py`` of each).

GPT-2 (Conv1D: weights stored [in, out]), OPT, GPT-NeoX, Falcon, BLOOM, Phi-1/2, GPT-BigCode, GPT-J, StableLM,
EXAONE. All linears carry biases unless noted; LayerNorms have weight and bias.
"""

from __future__ import annotations

from typing import Any

from kvplan.models.synth_parts import Builder, tied

ARCHS = ("GPT2LMHeadModel", "OPTForCausalLM", "GPTNeoXForCausalLM", "FalconForCausalLM", "BloomForCausalLM",
         "PhiForCausalLM", "GPTBigCodeForCausalLM", "GPTJForCausalLM", "StableLmForCausalLM", "ExaoneForCausalLM")
TIED = {"GPT2LMHeadModel": True, "OPTForCausalLM": True, "FalconForCausalLM": True, "BloomForCausalLM": True,
        "GPTBigCodeForCausalLM": True, "GPTNeoXForCausalLM": False, "PhiForCausalLM": False,
        "GPTJForCausalLM": False, "StableLmForCausalLM": False, "ExaoneForCausalLM": False}


def handles(arch: str) -> bool:
    return arch in ARCHS


def _ln(b: Builder, name: str, h: int, i: int | None, bias: bool = True) -> None:
    b.raw(f"{name}.weight", (h,), i)
    if bias:
        b.raw(f"{name}.bias", (h,), i)


def build(b: Builder, spec, c: dict[str, Any], top: dict[str, Any]) -> None:
    arch, h, v, n = spec.architecture, spec.hidden_size, spec.vocab_size, spec.num_layers
    nq, nkv, hd = spec.num_attention_heads, spec.num_kv_heads, spec.head_dim
    inter = spec.intermediate_size or int(c.get("n_inner") or c.get("ffn_dim") or 4 * h)
    pos = int(c.get("max_position_embeddings") or c.get("n_positions") or 2048)
    tie = c.get("tie_word_embeddings", TIED[arch])
    tie = tie if isinstance(tie, bool) else tied(spec, c, top)
    head = "lm_head.weight"
    if arch == "GPT2LMHeadModel":
        b.raw("transformer.wte.weight", (v, h))
        b.raw("transformer.wpe.weight", (pos, h))
        for i in range(n):
            p = "transformer.h.{L}"
            _ln(b, f"{p}.ln_1", h, i)
            _ln(b, f"{p}.ln_2", h, i)
            for name, (din, dout) in (("attn.c_attn", (h, 3 * h)), ("attn.c_proj", (h, h)),
                                      ("mlp.c_fc", (h, inter)), ("mlp.c_proj", (inter, h))):
                b.raw(f"{p}.{name}.weight", (din, dout), i)  # Conv1D keeps [in, out]
                b.raw(f"{p}.{name}.bias", (dout,), i)
        _ln(b, "transformer.ln_f", h, None)
    elif arch == "OPTForCausalLM":
        proj = int(c.get("word_embed_proj_dim") or h)
        b.raw("model.decoder.embed_tokens.weight", (v, proj))
        b.raw("model.decoder.embed_positions.weight", (pos + 2, h))  # OPTLearnedPositionalEmbedding offset 2
        if proj != h:
            b.lin("model.decoder.project_in", h, proj, quant=False)
            b.lin("model.decoder.project_out", proj, h, quant=False)
        for i in range(n):
            p = "model.decoder.layers.{L}"
            for nm in ("q_proj", "k_proj", "v_proj", "out_proj"):
                b.lin(f"{p}.self_attn.{nm}", h, h, i, bias=True)
            _ln(b, f"{p}.self_attn_layer_norm", h, i)
            b.lin(f"{p}.fc1", inter, h, i, bias=True)
            b.lin(f"{p}.fc2", h, inter, i, bias=True)
            _ln(b, f"{p}.final_layer_norm", h, i)
        if c.get("do_layer_norm_before", True) and not c.get("_remove_final_layer_norm", False):
            _ln(b, "model.decoder.final_layer_norm", h, None)
    elif arch in ("GPTNeoXForCausalLM", "FalconForCausalLM", "BloomForCausalLM"):
        neox, falcon = arch == "GPTNeoXForCausalLM", arch == "FalconForCausalLM"
        kvh = nkv if falcon else nq  # GPT-NeoX and BLOOM have no grouped KV heads (a config key is ignored)
        root = "gpt_neox" if neox else "transformer"
        bias = bool(c.get("bias", False)) if falcon else True
        b.raw(f"{root}.{'embed_in' if neox else 'word_embeddings'}.weight", (v, h))
        if arch == "BloomForCausalLM":
            _ln(b, "transformer.word_embeddings_layernorm", h, None)
        for i in range(n):
            p = f"{root}.{'layers' if neox else 'h'}.{{L}}"
            att = f"{p}.{'attention' if neox else 'self_attention'}"
            b.lin(f"{att}.query_key_value", (nq + 2 * kvh) * hd, h, i, bias=bias)
            b.lin(f"{att}.dense", h, nq * hd, i, bias=bias)
            b.lin(f"{p}.mlp.dense_h_to_4h", inter, h, i, bias=bias)
            b.lin(f"{p}.mlp.dense_4h_to_h", h, inter, i, bias=bias)
            if falcon and c.get("new_decoder_architecture"):
                _ln(b, f"{p}.ln_attn", h, i)
                _ln(b, f"{p}.ln_mlp", h, i)
            else:
                _ln(b, f"{p}.input_layernorm", h, i)
                if not (falcon and c.get("parallel_attn", True)):
                    _ln(b, f"{p}.post_attention_layernorm", h, i)
        _ln(b, f"{root}.{'final_layer_norm' if neox else 'ln_f'}", h, None)
        head = "embed_out.weight" if neox else head
    elif arch == "GPTBigCodeForCausalLM":
        b.raw("transformer.wte.weight", (v, h))
        b.raw("transformer.wpe.weight", (pos, h))
        for i in range(n):
            p = "transformer.h.{L}"
            _ln(b, f"{p}.ln_1", h, i)
            _ln(b, f"{p}.ln_2", h, i)
            b.lin(f"{p}.attn.c_attn", h + 2 * nkv * hd, h, i, bias=True)
            b.lin(f"{p}.attn.c_proj", h, h, i, bias=True)
            b.lin(f"{p}.mlp.c_fc", inter, h, i, bias=True)
            b.lin(f"{p}.mlp.c_proj", h, inter, i, bias=True)
        _ln(b, "transformer.ln_f", h, None)
    else:  # Phi, GPT-J, StableLM, EXAONE: separate q/k/v
        gptj, exaone, phi = arch == "GPTJForCausalLM", arch == "ExaoneForCausalLM", arch == "PhiForCausalLM"
        root = "transformer" if (gptj or exaone) else "model"
        b.raw(f"{root}.{'wte' if (gptj or exaone) else 'embed_tokens'}.weight", (v, h))
        qkv_bias = phi or bool(c.get("use_qkv_bias"))
        for i in range(n):
            p = f"{root}.{'h' if (gptj or exaone) else 'layers'}.{{L}}"
            att = f"{p}.attn.attention" if exaone else (f"{p}.attn" if gptj else f"{p}.self_attn")
            for nm, rows in (("q_proj", nq * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd)):
                b.lin(f"{att}.{nm}", rows, h, i, bias=qkv_bias)
            b.lin(f"{att}.{'dense' if phi else ('out_proj' if (gptj or exaone) else 'o_proj')}", h, nq * hd, i,
                  bias=phi)
            if gptj:
                b.lin(f"{p}.mlp.fc_in", inter, h, i, bias=True)
                b.lin(f"{p}.mlp.fc_out", h, inter, i, bias=True)
                _ln(b, f"{p}.ln_1", h, i)
            elif phi:
                b.lin(f"{p}.mlp.fc1", inter, h, i, bias=True)
                b.lin(f"{p}.mlp.fc2", h, inter, i, bias=True)
                _ln(b, f"{p}.input_layernorm", h, i)
            else:
                up = ("c_fc_0", "c_fc_1", "c_proj") if exaone else ("gate_proj", "up_proj", "down_proj")
                b.lin(f"{p}.mlp.{up[0]}", inter, h, i)
                b.lin(f"{p}.mlp.{up[1]}", inter, h, i)
                b.lin(f"{p}.mlp.{up[2]}", h, inter, i)
                _ln(b, f"{p}.{'ln_1' if exaone else 'input_layernorm'}", h, i, bias=not exaone)
                _ln(b, f"{p}.{'ln_2' if exaone else 'post_attention_layernorm'}", h, i, bias=not exaone)
        final = "ln_f" if (gptj or exaone) else ("final_layernorm" if phi else "norm")
        _ln(b, f"{root}.{final}", h, None, bias=not exaone)
        if gptj or phi:
            b.raw("lm_head.bias", (v,))
    if not tie:
        b.raw(head, (v, h))
