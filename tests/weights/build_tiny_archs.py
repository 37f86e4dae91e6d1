#!/usr/bin/env python3
"""Save tiny random checkpoints of many architectures with transformers (run with the engine venv's python:
`.venv-vllm/bin/python tests/weights/build_tiny_archs.py OUTDIR [NAME ...]`).

Each directory gets config.json + model.safetensors as `save_pretrained` writes them: the ground truth that
kvplan's config-only tensor synthesis (src/kvplan/models/synth*.py) must reproduce name by name. No tokenizer
(kvplan reads only config.json and the safetensors headers). Vocab 300 (not a multiple of 64) so that the
engines' vocab padding shows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

V = 300
COMMON = dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False)

CONFIGS: dict[str, tuple[str, dict]] = {
    "qwen2": ("Qwen2Config", dict(COMMON)),
    "qwen2_tied": ("Qwen2Config", dict(COMMON, tie_word_embeddings=True)),
    "qwen2_moe": ("Qwen2MoeConfig", dict(COMMON, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                         shared_expert_intermediate_size=48, decoder_sparse_step=1)),
    "qwen3_moe": ("Qwen3MoeConfig", dict(COMMON, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                         moe_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[0])),
    "mixtral": ("MixtralConfig", dict(COMMON, num_local_experts=4, num_experts_per_tok=2)),
    "phi3": ("Phi3Config", dict(COMMON, pad_token_id=0)),
    "starcoder2": ("Starcoder2Config", dict(COMMON, use_bias=True)),
    "olmo2": ("Olmo2Config", dict(COMMON)),
    "glm4": ("Glm4Config", dict(COMMON, head_dim=16, attention_bias=True, pad_token_id=0)),
    "glm4_moe": ("Glm4MoeConfig", dict(COMMON, head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
                                       moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1,
                                       attention_bias=True, use_qk_norm=True, n_group=1, topk_group=1)),
    "gpt_oss": ("GptOssConfig", dict(COMMON, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                                     intermediate_size=32, sliding_window=32, layer_types=["sliding_attention",
                                                                                          "full_attention"])),
    "granite": ("GraniteConfig", dict(COMMON)),
    "gpt2": ("GPT2Config", dict(vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=256)),
    "opt": ("OPTConfig", dict(vocab_size=V, hidden_size=64, ffn_dim=96, num_hidden_layers=2, num_attention_heads=4,
                              max_position_embeddings=256, word_embed_proj_dim=64)),
    "gpt_neox": ("GPTNeoXConfig", dict(COMMON)),
    "gpt_bigcode": ("GPTBigCodeConfig", dict(vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=256,
                                             multi_query=True)),
    "gptj": ("GPTJConfig", dict(vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=256, rotary_dim=8)),
    "bloom": ("BloomConfig", dict(vocab_size=V, hidden_size=64, n_layer=2, n_head=4)),
    "falcon": ("FalconConfig", dict(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                    new_decoder_architecture=True, num_kv_heads=2)),
    "phi": ("PhiConfig", dict(COMMON, num_key_value_heads=4)),
    "stablelm": ("StableLmConfig", dict(COMMON, use_qkv_bias=True)),
    "qwen3_next": ("Qwen3NextConfig", dict(COMMON, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                           moe_intermediate_size=32, shared_expert_intermediate_size=32,
                                           linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                                           linear_value_head_dim=16, linear_conv_kernel_dim=4,
                                           full_attention_interval=2, decoder_sparse_step=1)),
}
_TEXT = dict(COMMON)
_TEXT.pop("tie_word_embeddings")
# image-text models (saved with AutoModelForImageTextToText); vision towers are what kvplan estimates
VL_CONFIGS: dict[str, tuple[str, dict]] = {
    "qwen2_5_vl": ("Qwen2_5_VLConfig", dict(
        text_config=dict(_TEXT, rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=64,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, fullatt_block_indexes=[1]))),
    "gemma3_mm": ("Gemma3Config", dict(
        text_config=dict(_TEXT, head_dim=16),
        vision_config=dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                           image_size=56, patch_size=14, vision_use_head=False), mm_tokens_per_image=4)),
}
CONFIGS.update(VL_CONFIGS)


def build(name: str, out: Path) -> Path:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    cls_name, kw = CONFIGS[name]
    cfg = getattr(transformers, cls_name)(**kw)
    cfg.torch_dtype = torch.bfloat16
    torch.manual_seed(0)
    auto = AutoModelForImageTextToText if name in VL_CONFIGS else AutoModelForCausalLM
    model = auto.from_config(cfg).to(torch.bfloat16)
    path = out / name
    model.save_pretrained(path)
    json.loads((path / "config.json").read_text())  # written
    return path


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    names = argv[1:] or list(CONFIGS)
    for n in names:
        try:
            print(n, build(n, out))
        except Exception as e:  # an architecture this transformers lacks is reported, not fatal
            print(n, "FAILED", type(e).__name__, str(e)[:200])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
