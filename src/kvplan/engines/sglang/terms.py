"""The per-rank feature terms of an SGLang plan (speculative draft, LoRA buffers) and what stays unmodelled."""

from __future__ import annotations

from kvplan.engines.sglang.args import UNMODELED, SGLangArgs
from kvplan.engines.sglang.memory import GpuPool
from kvplan.result import RankTerm, feature_term

_SG = "https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/"


def feature_terms(gpu: GpuPool) -> tuple[RankTerm, ...]:
    out = []
    if gpu.spec is not None:
        s = gpu.spec
        out.append(feature_term("draft-weights", s.weights_bytes, "per rank", f"outside the static pool: {s.draft}",
                               _SG + "speculative/eagle_worker.py::EAGLEWorker.__init__"))
        where = "inside the static pool (the target's cell grows by it)" if s.in_static else "outside the static pool"
        out.append(feature_term("draft-kv-pool", gpu.draft_kv_pool_bytes, "per rank",
                               f"{where}: {s.kv_bytes_per_token:,} B/token × the target's "
                               f"{gpu.kv_tokens:,} tokens (+1 page); {s.algorithm} steps {s.num_steps}, topk "
                               f"{s.eagle_topk}, draft tokens {s.num_draft_tokens}",
                               "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/model_executor/"
                               "pool_configurator.py" if s.in_static
                               else _SG + "model_executor/model_runner_kv_cache_mixin.py::init_memory_pool"))
    if gpu.lora is not None:
        lo = gpu.lora
        out.append(feature_term("lora-buffers", lo.bytes, "per rank", f"taken before the KV pool is sized: "
                               f"{lo.max_loras_per_batch} × rank {lo.max_lora_rank} × {', '.join(lo.target_modules)}",
                               _SG + "lora/mem_pool.py::LoRAMemoryPool.init_buffers"))
        if lo.host_bytes:
            out.append(feature_term("lora-adapters-host", lo.host_bytes, "per rank, host",
                                   "the adapters of --lora-paths, loaded whole to the CPU on every rank",
                                   _SG + "lora/lora_manager.py::LoRAManager.load_lora_weights"))
    return tuple(out)


def still_unmodeled(args: SGLangArgs, gpu: GpuPool) -> tuple[str, ...]:
    """``args.unmodeled`` less the features this plan sized."""
    done = set()
    if gpu.spec is not None:
        done.add(UNMODELED["speculative_algorithm"])
    if gpu.lora is not None:
        done.add(UNMODELED["enable_lora"])
    return tuple(u for u in args.unmodeled if u not in done)
