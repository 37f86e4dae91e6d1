"""``--quantization fp8`` on a bf16/fp16 checkpoint (online quantization): what a rank holds once SGLang measures.

The steps, the same in 0.4.x and 0.5.x (read in the 0.4.6.post5 and 0.5.2 wheels):

1. ``model_loader/loader.py::DefaultModelLoader.load_model`` builds the model in the checkpoint dtype and
   ``load_weights`` fills it: the whole bf16 model is resident first (the load peak), then
   ``load_weights_and_postprocess`` calls ``process_weights_after_loading`` module by module
   (https://github.com/sgl-project/sglang/blob/v0.4.6.post5/python/sglang/srt/model_loader/loader.py).
2. ``layers/quantization/fp8.py::Fp8LinearMethod.process_weights_after_loading`` (not fp8-serialized):
   ``per_token_group_quant_fp8(layer.weight, K)`` (CUTLASS/Marlin; one fp32 scale per output row) or
   ``input_to_float8`` (per tensor), then ``layer.weight = Parameter(qweight.t())``: the bf16 tensor loses its last
   reference and returns to the caching allocator. ``Fp8MoEMethod.process_weights_after_loading`` allocates
   ``w13_weight``/``w2_weight`` in fp8 (``torch.empty_like``), fills them expert by expert with ``scaled_fp8_quant``
   (one fp32 scale per expert) and swaps the parameters the same way
   (https://github.com/sgl-project/sglang/blob/v0.4.6.post5/python/sglang/srt/layers/quantization/fp8.py).
3. ``model_executor/model_runner.py::ModelRunner.load_model`` logs "Load weight end" from
   ``utils.py::get_available_gpu_memory``, which calls ``torch.cuda.empty_cache()`` before ``mem_get_info``; so does
   ``profile_max_num_token`` (``rest = available - total × (1 − mem_fraction_static)``): the freed bf16 segments are
   released and what the profile sees is the fp8 model, plus the segments the allocator cannot release because an
   fp8 tensor (or its scale) was placed in a freed bf16 block. Replaying the caching allocator's rules
   (``models.torch_allocator``: best fit, splits, whole free segments released) over that sequence leaves
   0.37 GiB per rank reserved beyond the tensors for Llama-3.1-70B TP8 and 0.39 GiB for a Grok-2-sized MoE TP8,
   about 0.2 GiB above the packing of never-freed tensors kvplan already counts (``allocator_segments``, 0.17 GiB
   for Llama-3.1-70B TP8): under 1 % of the KV budget, left out. kvplan counts the fp8 tensors
   (https://github.com/sgl-project/sglang/blob/v0.4.6.post5/python/sglang/srt/model_executor/model_runner.py).
4. Except where the model class keeps the bf16 experts referenced (``EXPERTS_KEPT_EAGERLY``): then they are never
   freed and the profile sees both copies.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.versions import Version
from kvplan.models.placement import role_of
from kvplan.models.postload import LINEAR_GROUPS
from kvplan.models.spec import ModelSpec
from kvplan.models.tensors import TensorGroup


def checkpoint_quantized(groups: tuple[TensorGroup, ...]) -> bool:
    """A checkpoint already quantized (fp8, int and packed matrices): ``--quantization fp8`` does not requantize it."""
    return any(g.dtype.startswith(("F8", "I32", "U8", "I8")) and len(g.shape) >= 2 for g in groups)


def online_fp8(groups: tuple[TensorGroup, ...]) -> tuple[tuple[TensorGroup, ...], int]:
    """Linear and expert weights in the model dtype become fp8 (1 byte); returns (groups, bytes saved)."""
    out, saved = [], 0
    for g in groups:
        r = role_of(g)
        if r.group in LINEAR_GROUPS and r.kind != "norm" and g.template.endswith("weight") and len(g.shape) >= 2 \
                and g.dtype in ("BF16", "F16", "F32"):
            ng = replace(g, dtype="F8_E4M3")
            saved += g.nbytes - ng.nbytes
            out.append(ng)
        else:
            out.append(g)
    return tuple(out), saved


# load_weights builds ``routed_experts_weights_of_layer = {layer: mlp.get_moe_weights()}`` eagerly (a LazyValue
# outside these windows): the dict holds the checkpoint-dtype expert tensors, so after
# ``Fp8MoEMethod.process_weights_after_loading`` swaps in the fp8 parameters the old ones are never freed, and
# ``get_available_gpu_memory`` (``torch.cuda.empty_cache`` then ``mem_get_info``) still counts them. Read from the
# wheels 0.4.6, 0.4.6.post1, .post3, .post4, .post5, 0.4.7, 0.4.7.post1, 0.4.8, 0.4.8.post1, 0.4.10, 0.5.2, 0.5.5,
# 0.5.8, 0.5.9:
# https://github.com/sgl-project/sglang/blob/v0.4.6.post5/python/sglang/srt/models/qwen3_moe.py (end of
# ``Qwen3MoeForCausalLM.load_weights``, first in 0.4.6.post5; LazyValue in v0.5.9) and
# https://github.com/sgl-project/sglang/blob/v0.4.6.post5/python/sglang/srt/models/deepseek_v2.py
# (``DeepseekV2ForCausalLM.post_load_weights``, called from ``load_weights``; LazyValue from 0.4.7).
EXPERTS_KEPT_EAGERLY: tuple[tuple[str, str, str], ...] = (
    ("Qwen3MoeForCausalLM", "0.4.6.post5", "0.5.9"),
    ("DeepseekV2ForCausalLM", "0.4.6.post5", "0.4.7"),
    ("DeepseekV3ForCausalLM", "0.4.6.post5", "0.4.7"),
)


def experts_kept_eagerly(model: ModelSpec, v: Version) -> bool:
    """Whether this version's model class keeps the checkpoint-dtype experts referenced after online fp8."""
    return any(model.architecture == arch and Version(lo) <= v < Version(hi) for arch, lo, hi in EXPERTS_KEPT_EAGERLY)
