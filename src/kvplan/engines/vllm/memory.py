"""What one vLLM worker (rank) gives to its KV cache, and the layer specs that cost it.

Budget (0.33 ``v1/worker/gpu_worker.py::Worker.determine_available_memory``, ``v1/worker/utils.py::request_memory``):
``--kv-cache-memory-bytes`` exactly when given; else ``ceil(total × gpu_memory_utilization) − non-KV memory
(weights + activation peak + non-torch) − CUDA-graph estimate (from 0.21)``, which kvplan can only estimate.
vLLM-CPU (``platforms/cpu.py::CpuPlatform.check_and_update_config``): ``VLLM_CPU_KVCACHE_SPACE`` whole GiB,
which overrides ``--kv-cache-memory-bytes``.
"""

from __future__ import annotations

from kvplan.engines.vllm.args import VLLMArgs
from kvplan.engines.vllm.dtype import ModelDtype
from kvplan.engines.vllm.hybrid import HybridPages
from kvplan.engines.vllm.kvcache import LayerSpec
from kvplan.engines.vllm.mla import KvHeads
from kvplan.engines.vllm.profiled import ProfileInputs
from kvplan.engines.vllm.terms import Budget, BudgetTerm
from kvplan.errors import KvplanError
from kvplan.hardware.cluster import Cluster
from kvplan.models.spec import ModelSpec
from kvplan.units import GiB

__all__ = ["Budget", "BudgetTerm", "budget", "kv_dtype_bytes", "layer_specs", "pp_layer_ranges"]


def kv_dtype_bytes(kv_cache_dtype: str, model: ModelSpec, model_dtype: ModelDtype) -> tuple[int, str]:
    """Bytes of one KV element: ``--kv-cache-dtype`` (config/cache.py CacheDType), "auto" = the checkpoint's fp8
    KV scheme if it declares one, else the model dtype vLLM resolved (``dtype.resolve_dtype``)."""
    d = (kv_cache_dtype or "auto").lower()
    if d == "auto":
        if model.kv_cache_fp8:
            return 1, "fp8 (auto: checkpoint kv_cache_scheme)"
        return model_dtype.bytes, f"{model_dtype.name} (auto: model dtype, {model_dtype.reason})"
    if d in ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"):
        return 1, d
    if d in ("bfloat16", "float16", "half", "bf16", "fp16"):
        return 2, d
    raise KvplanError(f"--kv-cache-dtype {kv_cache_dtype!r} is not modeled by kvplan",
                      "use auto, fp8, fp8_e4m3 or fp8_e5m2 (packed/per-token-head formats carry scales)")


def pp_layer_ranges(n_layers: int, pp: int) -> list[range]:
    """vllm/distributed/utils.py::get_pp_indices: extra layers go to the stages before the last. More stages than
    layers leave stages without a layer (no KV cache to plan there): refused, naming the pipeline."""
    if pp > n_layers:
        raise KvplanError(f"--pipeline-parallel-size {pp} is more pipeline stages than the model's {n_layers} "
                          f"decoder layers: {pp - n_layers} stage(s) would hold no layer",
                          f"use --pipeline-parallel-size {n_layers} or fewer")
    sizes = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        sizes[-i] += 1
    out, start = [], 0
    for s in sizes:
        out.append(range(start, start + s))
        start += s
    return out


def attention_token_bytes(model: ModelSpec, tp: int, hk: KvHeads, kv_bytes: int) -> int:
    """One token of one full-attention layer on one rank (``FullAttentionSpec.page_size_bytes`` at block size 1):
    K and V of ``max(1, kv_heads // tp)`` heads (``ModelConfig.get_num_kv_heads``: replicated when tp > kv heads)."""
    k_v = (hk.head_size * 2) if model.is_mla else (model.head_dim + model.v_head_dim)
    return max(1, hk.total_heads // tp) * k_v * kv_bytes


def layer_specs(model: ModelSpec, args: VLLMArgs, block_size: int, kv_bytes: int,
                heads_kind: KvHeads | None = None, hybrid: HybridPages | None = None) -> list[list[LayerSpec]]:
    """Per PP stage, the KV spec of each attention layer on one rank of that stage (``heads_kind``: whether an MLA
    model is cached as MLA in this version, ``mla.kv_heads``); a linear-attention layer holds one padded state page
    per block (``hybrid``: ``hybrid.hybrid_pages``)."""
    tp = args.tensor_parallel_size
    hk = heads_kind or KvHeads(model.is_mla, model.head_dim, total_heads=model.num_kv_heads)
    one: dict[str, LayerSpec] = {}  # the spec of each layer kind (layers of one kind share one frozen spec)

    def spec(kind: str) -> LayerSpec:
        if kind == "linear":
            if hybrid is None:
                raise KvplanError(f"internal: {model.name} has linear-attention layers but no hybrid pages")
            return LayerSpec("mamba", hybrid.page_bytes, state_blocks=hybrid.state_blocks,
                             block_tokens=hybrid.state_block_tokens)
        if hk.mla:  # MLAAttentionSpec: one latent row, replicated on every TP rank
            return LayerSpec("mla", block_size * model.mla_kv_dim * kv_bytes)
        page = block_size * attention_token_bytes(model, tp, hk, kv_bytes)
        return LayerSpec("swa" if kind == "swa" else "full", page, model.sliding_window if kind == "swa" else None)

    kinds = model.layer_kinds
    ranges = pp_layer_ranges(model.num_layers, args.pipeline_parallel_size)
    for kind in set(kinds[ranges[0].start:ranges[-1].stop]):  # the ranges are contiguous: each kind sized once
        one[kind] = spec(kind)
    return [[one[kinds[i]] for i in rng] for rng in ranges]


def _exact(available: int, source: str, weights_bytes: int) -> Budget:
    return Budget(available, source, True, weights_bytes=weights_bytes)


def budget(model: ModelSpec, args: VLLMArgs, cluster: Cluster | None, gmu: float, cudagraph_default: bool,
           weights_bytes: int, kv_memory_flag: bool, kv_memory_gib: float | None = None, *,
           profile: ProfileInputs | None = None) -> Budget:
    """The KV memory of one rank.

    Exact when given: ``--kv-memory-gib`` (a log's figure), ``VLLM_CPU_KVCACHE_SPACE`` (whole GiB; overrides
    ``--kv-cache-memory-bytes`` on CPU), ``--kv-cache-memory-bytes`` (0.10.2+). Otherwise, from
    ``--gpu-memory-utilization`` (``v1/worker/gpu_worker.py::Worker.determine_available_memory``; V0
    ``worker/worker.py::Worker.determine_num_available_blocks``)::

        available = ceil((nvidia-smi total − reserve) × gmu) − weights − activation peak − non-torch
                    − CUDA-graph estimate (V1 with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default from 0.20)

    each estimated term with its (low, high) range (``BudgetTerm``; ``calibration.py`` cites the figures).
    """
    if kv_memory_gib is not None:
        if kv_memory_gib < 0:
            raise KvplanError(f"--kv-memory-gib must be >= 0, got {kv_memory_gib}")
        return _exact(int(kv_memory_gib * GiB), f"--kv-memory-gib {kv_memory_gib:g} (per rank, from a log)",
                      weights_bytes)
    if args.is_cpu:
        space = args.env.get("VLLM_CPU_KVCACHE_SPACE")
        if space:  # integer GiB; overrides --kv-cache-memory-bytes (set after CLI parsing)
            return _exact(int(space) * GiB, f"VLLM_CPU_KVCACHE_SPACE={space} (whole GiB)", weights_bytes)
        if args.kv_cache_memory_bytes:
            return _exact(args.kv_cache_memory_bytes, "--kv-cache-memory-bytes", weights_bytes)
        raise KvplanError("vLLM-CPU sizes an automatic KV cache from NUMA node-0 memory minus the worker's RSS, "
                          "which cannot be known before launch",
                          "set VLLM_CPU_KVCACHE_SPACE=GiB or --kv-cache-memory-bytes")
    if args.kv_cache_memory_bytes and kv_memory_flag:
        return _exact(args.kv_cache_memory_bytes, "--kv-cache-memory-bytes (per GPU)", weights_bytes)
    if cluster is None:
        raise KvplanError("no GPU given", "pass --gpu NAME or --gpu-mem-mib N")
    if profile is None:
        raise KvplanError("internal: the profile inputs are needed to size the KV cache from "
                          "--gpu-memory-utilization")
    from kvplan.engines.vllm.profiled import profiled_budget

    return profiled_budget(model, args, cluster, gmu, cudagraph_default, weights_bytes, profile)
