"""What one vLLM worker (rank) gives to its KV cache, and the layer specs that cost it.

Budget (0.33 ``v1/worker/gpu_worker.py::Worker.determine_available_memory``, ``v1/worker/utils.py::request_memory``):
``--kv-cache-memory-bytes`` exactly when given; else ``ceil(total × gpu_memory_utilization) − non-KV memory
(weights + activation peak + non-torch) − CUDA-graph estimate (from 0.21)``, which kvplan can only estimate.
vLLM-CPU (``platforms/cpu.py::CpuPlatform.check_and_update_config``): ``VLLM_CPU_KVCACHE_SPACE`` whole GiB,
which overrides ``--kv-cache-memory-bytes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.engines.vllm.args import VLLMArgs
from kvplan.engines.vllm.kvcache import LayerSpec
from kvplan.errors import KvplanError
from kvplan.hardware.cluster import Cluster
from kvplan.models.spec import ModelSpec
from kvplan.units import GiB

# torch.cuda.mem_get_info total is below nvidia-smi's memory.total (driver reserve): H100 81,559 MiB ->
# about 79.2 GiB (reference notes 1.1); RTX 4090 24,564 MiB -> 23.65 GiB (vllm issue 13061).
DRIVER_RESERVE_BYTES = int(0.45 * GiB)
NON_TORCH_TP1 = int(0.25 * GiB)  # e.g. "non_torch_memory takes 0.20GiB" (PR #14447), 0.25 (issue #13061)
NON_TORCH_PER_RANK = int(0.1 * GiB)  # NCCL buffers grow with TP (estimate)
CUDAGRAPH_ESTIMATE = int(0.5 * GiB)  # "Estimated CUDA graph memory: 0.17-0.36 GiB" for small models (estimate)


def kv_dtype_bytes(kv_cache_dtype: str, model: ModelSpec, dtype: str = "auto") -> tuple[int, str]:
    d = (kv_cache_dtype or "auto").lower()
    if d == "auto":
        if model.kv_cache_fp8:
            return 1, "fp8 (auto: checkpoint kv_cache_scheme)"
        if dtype not in ("auto", None):
            from kvplan.models.spec import DTYPE_BYTES

            return DTYPE_BYTES.get(dtype, model.dtype_bytes), f"{dtype} (--dtype)"
        return model.dtype_bytes, f"{model.dtype} (auto: model dtype)"
    if d in ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"):
        return 1, d
    if d in ("bfloat16", "float16", "half", "bf16", "fp16"):
        return 2, d
    raise KvplanError(f"--kv-cache-dtype {kv_cache_dtype!r} is not modeled by kvplan",
                      "use auto, fp8, fp8_e4m3 or fp8_e5m2 (packed/per-token-head formats carry scales)")


def pp_layer_ranges(n_layers: int, pp: int) -> list[range]:
    """vllm/distributed/utils.py::get_pp_indices: extra layers go to the stages before the last."""
    sizes = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        sizes[-i] += 1
    out, start = [], 0
    for s in sizes:
        out.append(range(start, start + s))
        start += s
    return out


def layer_specs(model: ModelSpec, args: VLLMArgs, block_size: int, kv_bytes: int) -> list[list[LayerSpec]]:
    """Per PP stage, the KV spec of each attention layer on one rank of that stage."""
    tp = args.tensor_parallel_size
    stages = []
    for rng in pp_layer_ranges(model.num_layers, args.pipeline_parallel_size):
        specs = []
        for i in rng:
            kind = model.layer_kinds[i]
            if kind == "linear":
                raise KvplanError(f"{model.name}: hybrid linear-attention (Mamba/GDN) KV groups are not modeled "
                                  "for vLLM yet", "plan it with SGLang semantics or pass the engine's log to explain")
            if model.is_mla:  # MLAAttentionSpec: one latent row, replicated on every TP rank
                specs.append(LayerSpec("mla", block_size * model.mla_kv_dim * kv_bytes))
                continue
            # ModelConfig.get_num_kv_heads: max(1, kv_heads // tp) (replicated when tp > kv heads)
            heads = max(1, model.num_kv_heads // tp)
            page = block_size * heads * (model.head_dim + model.v_head_dim) * kv_bytes
            specs.append(LayerSpec("swa" if kind == "swa" else "full", page,
                                   model.sliding_window if kind == "swa" else None))
        stages.append(specs)
    return stages


@dataclass(frozen=True)
class Budget:
    available_bytes: int  # per rank, for the KV cache
    source: str
    exact: bool  # True when the engine takes the number as given (no profiling)
    requested_bytes: int | None = None  # ceil(total × utilization)
    non_kv_bytes: int | None = None
    cudagraph_bytes: int = 0
    weights_bytes: int = 0
    notes: tuple[str, ...] = ()


def budget(model: ModelSpec, args: VLLMArgs, cluster: Cluster | None, gmu: float, cudagraph_default: bool,
           weights_bytes: int, kv_memory_flag: bool, kv_memory_gib: float | None = None) -> Budget:
    if kv_memory_gib is not None:
        if kv_memory_gib < 0:
            raise KvplanError(f"--kv-memory-gib must be >= 0, got {kv_memory_gib}")
        return Budget(int(kv_memory_gib * GiB), f"--kv-memory-gib {kv_memory_gib:g} (per rank, from a log)", True,
                      weights_bytes=weights_bytes)
    if args.is_cpu:
        space = args.env.get("VLLM_CPU_KVCACHE_SPACE")
        if space:  # integer GiB; overrides --kv-cache-memory-bytes (set after CLI parsing)
            return Budget(int(space) * GiB, f"VLLM_CPU_KVCACHE_SPACE={space} (whole GiB)", True,
                          weights_bytes=weights_bytes)
        if args.kv_cache_memory_bytes:
            return Budget(args.kv_cache_memory_bytes, "--kv-cache-memory-bytes", True, weights_bytes=weights_bytes)
        raise KvplanError("vLLM-CPU sizes an automatic KV cache from NUMA node-0 memory minus the worker's RSS, "
                          "which cannot be known before launch",
                          "set VLLM_CPU_KVCACHE_SPACE=GiB or --kv-cache-memory-bytes")
    if args.kv_cache_memory_bytes and kv_memory_flag:
        return Budget(args.kv_cache_memory_bytes, "--kv-cache-memory-bytes (per GPU)", True,
                      weights_bytes=weights_bytes)
    if cluster is None:
        raise KvplanError("no GPU given", "pass --gpu NAME or --gpu-mem-mib N")
    total = cluster.gpu_mem_bytes - DRIVER_RESERVE_BYTES
    requested = math.ceil(total * gmu)
    notes = [f"GPU total as torch sees it ≈ nvidia-smi total − {DRIVER_RESERVE_BYTES / GiB:.2f} GiB driver reserve"]
    non_torch = NON_TORCH_TP1 + NON_TORCH_PER_RANK * (args.world_size - 1)
    mnbt = args.max_num_batched_tokens or 8192
    act = int(mnbt * model.hidden_size * 2 * 14)  # residual, qkv, MLP intermediates in bf16 (estimate)
    graphs = 0 if (args.enforce_eager or not cudagraph_default) else CUDAGRAPH_ESTIMATE
    non_kv = weights_bytes + act + non_torch
    notes.append(f"activation peak ≈ {act / GiB:.2f} GiB, non-torch ≈ {non_torch / GiB:.2f} GiB"
                 + (f", CUDA-graph estimate ≈ {graphs / GiB:.2f} GiB" if graphs else "")
                 + " (estimates: a startup log's 'Available KV cache memory' replaces them; pin the size with "
                 "--kv-cache-memory-bytes for an exact plan)")
    return Budget(requested - non_kv - graphs, f"ceil(total × {gmu}) − non-KV − graphs (estimated)", False,
                  requested_bytes=requested, non_kv_bytes=non_kv, cudagraph_bytes=graphs, weights_bytes=weights_bytes,
                  notes=tuple(notes))
