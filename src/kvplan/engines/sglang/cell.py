"""Bytes per token per rank ("cell size") as SGLang computes it.

0.5.23: ``model_executor/pool_configurator.py`` (``DefaultPoolConfigurator._compute_cell_size``,
``HybridSWAPoolConfigurator``), ``mem_cache/kv_cache_configurator.py`` (MLA dim);
0.5.9: ``model_runner_kv_cache_mixin.py::profile_max_num_token``. Same algebra in every version read.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.sglang.args import SGLangArgs
from kvplan.errors import KvplanError, UnsupportedModel
from kvplan.models.spec import ModelSpec

# configs/model_config.py::is_hybrid_swa_model: architectures that get a separate SWA pool.
# Gemma2/Gemma3 and Mistral are NOT on it: their sliding-window layers get full-length KV.
HYBRID_SWA_ARCHS = {"GptOssForCausalLM", "Llama4ForConditionalGeneration", "MiMoV2FlashForCausalLM",
                    "Step3p5ForCausalLM", "Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"}


def kv_dtype_bytes(kv_cache_dtype: str, model: ModelSpec) -> tuple[int, str]:
    """Element size of the KV cache (mem_cache/kv_cache_dtype.py::configure_kv_cache_dtype)."""
    d = (kv_cache_dtype or "auto").lower()
    if d == "auto":
        if model.kv_cache_fp8:
            return 1, "fp8_e4m3 (auto: checkpoint declares kv_cache_quant_algo FP8)"
        return model.dtype_bytes, f"{model.dtype} (auto: model dtype)"
    if d in ("fp8_e4m3", "fp8_e5m2", "fp8"):
        return 1, d
    if d in ("bf16", "bfloat16", "float16", "fp16", "half"):
        return 2, d
    if d in ("fp32", "float32", "float"):
        return 4, d
    raise KvplanError(f"--kv-cache-dtype {kv_cache_dtype!r} is not modeled by kvplan",
                      "use auto, bf16, fp8_e4m3 or fp8_e5m2 (fp4/mxfp8 layouts carry scales kvplan does not size)")


def pp_layers(n_layers: int, pp: int) -> list[int]:
    """Layers per PP stage (sglang/srt/distributed/utils.py::get_pp_indices: extra layers go to the
    stages before the last). More stages than layers leave stages without a layer (and without a KV pool):
    refused, naming the pipeline."""
    if pp > n_layers:
        raise KvplanError(f"--pp-size {pp} is more pipeline stages than the model's {n_layers} decoder layers: "
                          f"{pp - n_layers} stage(s) would hold no layer", f"use --pp-size {n_layers} or fewer")
    base = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        base[-i] += 1
    return base


@dataclass(frozen=True)
class Cell:
    bytes_per_token: int  # the logged-token cost on one rank (full-attention tokens for hybrids)
    kv_dtype_bytes: int
    kv_dtype: str
    heads_per_rank: int
    layers_local: int
    full_layer_bytes: int = 0  # per token per full layer (hybrid SWA split)
    swa_layer_bytes: int = 0
    n_full: int = 0
    n_swa: int = 0
    hybrid_swa: bool = False
    linear_layers_local: int = 0


def compute_cell(model: ModelSpec, args: SGLangArgs) -> Cell:
    """Per-rank, per-token KV bytes on the busiest PP stage."""
    size, label = kv_dtype_bytes(args.kv_cache_dtype, model)
    attn_tp = args.attn_tp_size
    stages = pp_layers(model.num_layers, args.pp_size)
    worst = max(range(len(stages)), key=lambda s: stages[s])
    start = sum(stages[:worst])
    kinds = model.layer_kinds[start:start + stages[worst]]
    if model.is_mla:
        # MLA is not sharded by TP: every attention-TP rank holds the whole latent row
        # (mem_cache/memory_pool.py::MLATokenToKVPool, kv_cache_dim = kv_lora_rank + qk_rope_head_dim)
        cell = model.mla_kv_dim * len(kinds) * size
        return Cell(cell, size, label, 1, len(kinds))
    # model_config.py::get_num_kv_heads: max(1, kv_heads // attn_tp) -> replicated below one head per rank
    heads = max(1, model.num_kv_heads // attn_tp)
    per_layer = heads * (model.head_dim + model.v_head_dim) * size
    n_lin = sum(1 for k in kinds if k == "linear")
    n_swa = sum(1 for k in kinds if k == "swa")
    n_full = len(kinds) - n_lin - n_swa
    hybrid_swa = (n_swa > 0 and model.architecture in HYBRID_SWA_ARCHS and not args.disable_hybrid_swa_memory)
    if n_lin and model.linear is None:
        raise UnsupportedModel(f"{model.name}: linear-attention layers without state shapes")
    if hybrid_swa:
        r = args.swa_full_tokens_ratio
        if n_full == 0:
            raise UnsupportedModel(f"{model.name}: a pure sliding-window stage is not modeled")
        # HybridSWAPoolConfigurator: cell = F*n_full + r*S*n_swa (logged tokens are full-layer tokens)
        cell = int(per_layer * n_full + r * per_layer * n_swa)
        return Cell(cell, size, label, heads, len(kinds), per_layer, per_layer, n_full, n_swa, True, n_lin)
    # Without a separate SWA pool, sliding-window layers keep full-length KV; linear layers keep none.
    cell = per_layer * (n_full + n_swa)
    return Cell(cell, size, label, heads, len(kinds), per_layer, 0, n_full + n_swa, 0, False, n_lin)
