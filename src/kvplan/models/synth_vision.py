"""Vision towers and projectors of multimodal checkpoints, from ``vision_config`` (estimated: where a config
copy lacks a size, the engine's own config-class default is used and the estimate says so).

- Kimi-K2.5 / Kimi-VL MoonViT: SGLang ``configs/kimi_k25.py::KimiK25VisionConfig`` defaults (patch 14, 64×64
  learned position grid, 16 heads, 27 layers, hidden 1152, intermediate 4304, merge 2×2) for missing keys; blocks
  ``wqkv``/``wo``/``mlp.fc0``/``mlp.fc1`` with biases (``models/kimi_k25.py::MoonViTEncoderLayer``), projector
  ``pre_norm`` + ``proj.0`` [4v, 4v] + ``proj.2`` [text, 4v] (``K2VLMultiModalProjector``).
- Qwen2-VL / Qwen2.5-VL: transformers ``modeling_qwen2_5_vl.py`` (patch conv without bias, qkv/proj with bias,
  gated MLP with biases in 2.5, ``merger`` ln_q + mlp.0 + mlp.2).
- Gemma 3 SigLIP: transformers ``modeling_siglip.py`` + ``Gemma3MultiModalProjector``.
"""

from __future__ import annotations

from typing import Any

from kvplan.models.synth_parts import Builder

# SGLang KimiK25VisionConfig.__init__ defaults (python/sglang/srt/configs/kimi_k25.py, v0.5.9)
MOONVIT = {"patch_size": 14, "init_pos_emb_height": 64, "init_pos_emb_width": 64, "num_attention_heads": 16,
           "num_hidden_layers": 27, "hidden_size": 1152, "intermediate_size": 4304, "merge_kernel_size": [2, 2]}
SIGLIP_SO400M_INTERMEDIATE = 4304  # google/siglip-so400m-patch14-384 (Gemma 3's tower) when the copy omits it


def _vget(v: dict[str, Any], key: str, default: Any) -> Any:
    return v.get(key) if v.get(key) is not None else v.get("vt_" + key, default) or default


def _bias_lin(b: Builder, name: str, out: int, inp: int, bias: bool = True) -> None:
    b.lin(name, out, inp, bias=bias, quant=False)


def _ln(b: Builder, name: str, n: int, bias: bool = True) -> None:
    b.raw(f"{name}.weight", (n,))
    if bias:
        b.raw(f"{name}.bias", (n,))


def build(b: Builder, spec, top: dict[str, Any]) -> list[str]:
    """Add the tower's tensors; returns what was estimated (for the plan's assumptions)."""
    v = top.get("vision_config")
    if not isinstance(v, dict):
        return []
    mt, th = str(top.get("model_type") or ""), spec.hidden_size
    if mt in ("kimi_k25", "kimi_vl") or "vt_hidden_size" in v:
        vh, vi = int(_vget(v, "hidden_size", 1152)), int(_vget(v, "intermediate_size", 4304))
        layers, ps = int(_vget(v, "num_hidden_layers", 27)), int(_vget(v, "patch_size", 14))
        gh, gw = int(_vget(v, "init_pos_emb_height", 64)), int(_vget(v, "init_pos_emb_width", 64))
        mh, mw = _vget(v, "merge_kernel_size", [2, 2])
        t = "vision_tower"
        b.raw(f"{t}.patch_embed.proj.weight", (vh, 3, ps, ps))
        b.raw(f"{t}.patch_embed.proj.bias", (vh,))
        b.raw(f"{t}.patch_embed.pos_emb.weight", (gh, gw, vh))
        for i in range(layers):
            p = f"{t}.encoder.blocks.{i}"
            _bias_lin(b, f"{p}.wqkv", 3 * vh, vh)
            _bias_lin(b, f"{p}.wo", vh, vh)
            _ln(b, f"{p}.norm0", vh)
            _ln(b, f"{p}.norm1", vh)
            _bias_lin(b, f"{p}.mlp.fc0", vi, vh)
            _bias_lin(b, f"{p}.mlp.fc1", vh, vi)
        _ln(b, f"{t}.encoder.final_layernorm", vh)
        m = vh * int(mh) * int(mw)
        _ln(b, "mm_projector.pre_norm", vh)
        _bias_lin(b, "mm_projector.proj.0", m, m)
        _bias_lin(b, "mm_projector.proj.2", th, m)
        return [f"vision tower (MoonViT {layers}x{vh}, intermediate {vi}) and projector estimated from "
                "vision_config and SGLang's KimiK25VisionConfig defaults"]
    if mt in ("qwen2_5_vl", "qwen2_vl") or "depth" in v:
        q25 = mt == "qwen2_5_vl" or "out_hidden_size" in v
        vh = int((v.get("hidden_size") if q25 else v.get("embed_dim")) or 1280)
        vi = int(v.get("intermediate_size") or int(v.get("mlp_ratio") or 4) * vh)
        out = int(v.get("out_hidden_size") or (v.get("hidden_size") if not q25 else th) or th)
        layers, ps = int(v.get("depth") or 32), int(v.get("patch_size") or 14)
        tps, merge = int(v.get("temporal_patch_size") or 2), int(v.get("spatial_merge_size") or 2)
        b.raw("visual.patch_embed.proj.weight", (vh, 3, tps, ps, ps))
        for i in range(layers):
            p = f"visual.blocks.{i}"
            _ln(b, f"{p}.norm1", vh, bias=not q25)
            _ln(b, f"{p}.norm2", vh, bias=not q25)
            _bias_lin(b, f"{p}.attn.qkv", 3 * vh, vh)
            _bias_lin(b, f"{p}.attn.proj", vh, vh)
            if q25:
                _bias_lin(b, f"{p}.mlp.gate_proj", vi, vh)
                _bias_lin(b, f"{p}.mlp.up_proj", vi, vh)
                _bias_lin(b, f"{p}.mlp.down_proj", vh, vi)
            else:
                _bias_lin(b, f"{p}.mlp.fc1", vi, vh)
                _bias_lin(b, f"{p}.mlp.fc2", vh, vi)
        m = vh * merge * merge
        _ln(b, "visual.merger.ln_q", vh, bias=not q25)
        _bias_lin(b, "visual.merger.mlp.0", m, m)
        _bias_lin(b, "visual.merger.mlp.2", out, m)
        return [f"vision tower ({layers}x{vh}) and merger estimated from vision_config"]
    if mt == "gemma3" or v.get("model_type") == "siglip_vision_model":
        vh, layers = int(v.get("hidden_size") or 1152), int(v.get("num_hidden_layers") or 27)
        vi = int(v.get("intermediate_size") or SIGLIP_SO400M_INTERMEDIATE)
        ps, img = int(v.get("patch_size") or 14), int(v.get("image_size") or 896)
        t = "vision_tower.vision_model"
        b.raw(f"{t}.embeddings.patch_embedding.weight", (vh, 3, ps, ps))
        b.raw(f"{t}.embeddings.patch_embedding.bias", (vh,))
        b.raw(f"{t}.embeddings.position_embedding.weight", ((img // ps) ** 2, vh))
        for i in range(layers):
            p = f"{t}.encoder.layers.{i}"
            _ln(b, f"{p}.layer_norm1", vh)
            _ln(b, f"{p}.layer_norm2", vh)
            for nm in ("q_proj", "k_proj", "v_proj", "out_proj"):
                _bias_lin(b, f"{p}.self_attn.{nm}", vh, vh)
            _bias_lin(b, f"{p}.mlp.fc1", vi, vh)
            _bias_lin(b, f"{p}.mlp.fc2", vh, vi)
        _ln(b, f"{t}.post_layernorm", vh)
        if v.get("vision_use_head") is True:  # SigLIP attention-pooling head (Gemma 3 sets it false)
            b.raw(f"{t}.head.probe", (1, 1, vh))
            b.raw(f"{t}.head.attention.in_proj_weight", (3 * vh, vh))
            b.raw(f"{t}.head.attention.in_proj_bias", (3 * vh,))
            _bias_lin(b, f"{t}.head.attention.out_proj", vh, vh)
            _ln(b, f"{t}.head.layernorm", vh)
            _bias_lin(b, f"{t}.head.mlp.fc1", vi, vh)
            _bias_lin(b, f"{t}.head.mlp.fc2", vh, vi)
        b.raw("multi_modal_projector.mm_input_projection_weight", (vh, th))
        b.raw("multi_modal_projector.mm_soft_emb_norm.weight", (vh,))
        return [f"vision tower (SigLIP {layers}x{vh}, intermediate {vi}) estimated from vision_config"]
    return [f"vision tower of {mt or spec.architecture} not modelled (its weights are not counted)"]
