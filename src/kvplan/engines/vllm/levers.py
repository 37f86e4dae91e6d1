"""vLLM's levers, as LeverSpecs (the flags the launch command changes; each rewrite is evaluated like any launch):
gpu-memory-utilization steps (or a doubled explicit KV size, which is what vLLM-CPU and --kv-cache-memory-bytes
launches use); fp8 KV; a second replica.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvplan.engines.levers import LeverInputs, LeverSpec, steps
from kvplan.engines.vllm.args import parse_vllm
from kvplan.engines.vllm.settings import vllm_settings


def levers(p: LeverInputs, skipped: list[str]) -> Iterator[LeverSpec]:
    s = vllm_settings(p.current)
    if not s.kv_budget_exact and s.platform == "cuda":
        gmu = s.gpu_memory_utilization
        yield from steps(p, "--gpu-memory-utilization", "gpu-util", gmu, skipped,
                         lambda x: f"+{x - gmu:.2f} × GPU memory per rank for the KV cache (ceil(total × u))")
    elif s.kv_budget_exact and "--kv-memory-gib" not in s.kv_budget_source:
        args = parse_vllm(p.cmd)
        space = args.env.get("VLLM_CPU_KVCACHE_SPACE")
        note = "needs twice the KV memory free on the device / NUMA node (not checked)"
        if args.is_cpu and space:
            new = str(int(space) * 2)
            yield LeverSpec("KV memory ×2", {"VLLM_CPU_KVCACHE_SPACE": new}, [note])
        elif args.kv_cache_memory_bytes:
            new = str(args.kv_cache_memory_bytes * 2)
            yield LeverSpec("KV memory ×2", {"--kv-cache-memory-bytes": new}, [note])
    if "fp8" not in s.kv_cache_dtype:
        yield LeverSpec("fp8 KV", {"--kv-cache-dtype": "fp8"},
                        ["half the bytes per token; fp8 KV can change outputs: check quality first"])
    dp = s.data_parallel_size or 1
    c = p.current.cluster
    if 2 * s.world_size * dp <= c.gpus_per_node * c.nodes:
        yield LeverSpec("2 replicas", {"--data-parallel-size": str(dp * 2)},
                        [f"a second engine on {s.world_size * dp} more GPU(s) (--data-parallel-size)"])
    else:
        yield LeverSpec("2 replicas", {}, [f"a second launch of this command on {s.world_size * dp} more GPU(s), "
                                           "behind a router"], replicas=2)
