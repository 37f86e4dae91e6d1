"""Host memory a vLLM launch pins: three meanings of "host KV size".

- ``--kv-offloading-size`` native (0.14+): GiB **in total per engine**, split over the TP × PP workers
  (``v1/kv_offload/cpu/spec.py``; chunk = round_up(bytes_per_block × world_size, 4096), num_chunks = floor);
  a /dev/shm region from 0.27. With ``--kv-offloading-backend lmcache``: size / (TP × PP) into LMCache's
  per-rank ``max_local_cpu_size`` (0.14–0.21), ignored by the LMCache MP server (0.24+).
- LMCache in-process (``LMCacheConnectorV1``): ``max_local_cpu_size`` GiB **per rank** (default 5.0), eager and
  pinned; MLA stores on rank 0 only (``save_only_first_rank``); torch's pinned allocator (fallback when
  ``lmcache.cuda_ops`` does not load) rounds size + 4 KiB up to a power of two (LMCache 0.5.6).
- ``--cpu-offload-gb`` GiB of weights **per GPU**, pinned (observed up to ~1.9×: vLLM #56410).
- ``--swap-space`` GiB per GPU: pinned CPU blocks in V0; V1 allocates nothing; removed in 0.18.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvplan.engines.vllm.args import VLLMArgs
from kvplan.units import GiB

LMCACHE_DEFAULT_GIB = 5.0  # lmcache/v1/config.py max_local_cpu_size default
LMCACHE_CHUNK = 256
CPU_OFFLOAD_PIN_FACTOR = 1.9  # vllm issue #56410 "uses ~1.9x the host memory it asks for"


def pow2(n: int) -> int:
    return 1 << math.ceil(math.log2(n)) if n > 0 else 0


@dataclass(frozen=True)
class TierFix:
    """How a host tier is resized: the flag or env var, its unit, and how many ranks allocate it."""

    setting: str  # "--kv-offloading-size" or "LMCACHE_MAX_LOCAL_CPU_SIZE"
    env: bool  # an environment variable, not a flag
    unit: int  # bytes of one unit of the setting (GiB)
    per: str  # "rank" | "engine": the scope of the user's number
    ranks: int  # ranks on the node that allocate it
    pow2: bool  # the allocator pins size + 4 KiB rounded up to a power of two
    pin_factor: float = 1.0  # host bytes pinned per byte of the setting (--cpu-offload-gb: ~1.9×)

    def to_dict(self) -> dict[str, Any]:
        return {"env" if self.env else "flag": self.setting, "unit": self.unit, "per": self.per, "ranks": self.ranks,
                "pow2": self.pow2, "pin_factor": self.pin_factor}


@dataclass(frozen=True)
class HostTier:
    name: str  # kv-offloading-native | lmcache | cpu-offload | swap-space
    flag: str  # the flag or env var the user sets
    meaning: str  # scope of the user's number, in words
    per_rank_bytes: tuple[int, ...]  # requested, per rank of one node (rank 0 first)
    pinned_per_rank_bytes: tuple[int, ...]  # what the allocator pins (worst case where it may round)
    tokens_per_rank: int | None = None
    notes: tuple[str, ...] = ()
    shm_bytes: int = 0  # /dev/shm region this tier needs on the node
    fix: TierFix | None = None  # how to size it (the flag or env var, its unit and scope)
    shared_bytes: int | None = None  # one region shared by the node's ranks (counted once, not per rank)
    given: str | None = None  # the user's setting in words when it differs from what is allocated

    @property
    def node_bytes(self) -> int:
        return self.shared_bytes if self.shared_bytes is not None else sum(self.pinned_per_rank_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "flag": self.flag, "meaning": self.meaning,
                "per_rank_bytes": list(self.per_rank_bytes), "pinned_per_rank_bytes": list(self.pinned_per_rank_bytes),
                "node_bytes": self.node_bytes, "tokens_per_rank": self.tokens_per_rank, "shm_bytes": self.shm_bytes,
                "notes": list(self.notes), "shared": self.shared_bytes is not None,
                "fix": self.fix.to_dict() if self.fix else {}}


def _lmcache_size_gib(args: VLLMArgs) -> tuple[float, str]:
    extra = (args.kv_transfer_config or {}).get("kv_connector_extra_config") or {}
    for key in ("lmcache.max_local_cpu_size", "max_local_cpu_size"):
        if key in extra:
            return float(extra[key]), f"kv_connector_extra_config {key}"
    if "LMCACHE_MAX_LOCAL_CPU_SIZE" in args.env:
        return float(args.env["LMCACHE_MAX_LOCAL_CPU_SIZE"]), "LMCACHE_MAX_LOCAL_CPU_SIZE"
    return LMCACHE_DEFAULT_GIB, "LMCache default max_local_cpu_size"


def lmcache_tier(args: VLLMArgs, ranks_node: int, is_mla: bool, chunk_bytes_per_token: int, size_gib: float,
                 source: str) -> HostTier:
    size = int(size_gib * GiB)
    layerwise = args.env.get("LMCACHE_USE_LAYERWISE", "").lower() in ("1", "true")
    first_only = is_mla and not layerwise and args.env.get("LMCACHE_SAVE_ONLY_FIRST_RANK", "true").lower() != "false"
    per_rank = tuple(size if (r == 0 or not first_only) else 0 for r in range(ranks_node))
    pinned = tuple(pow2(b + 4096) if b else 0 for b in per_rank)
    notes = [f"{source} = {size_gib:g} GiB per rank (LMCache multiplies by 1024^3), allocated eagerly and pinned"]
    if first_only:
        notes.append("MLA: save_only_first_rank, so only rank 0 builds the CPU pool (LMCache cache_engine.post_init)")
    notes.append("pinned worst case: torch's pinned allocator rounds size + 4 KiB up to a power of two when "
                 "lmcache.cuda_ops does not load (LMCache 0.5.6 mem_alloc.alloc_pinned_ptr)")
    tokens = (size // (chunk_bytes_per_token * LMCACHE_CHUNK)) * LMCACHE_CHUNK if chunk_bytes_per_token else None
    return HostTier("lmcache", "LMCACHE_MAX_LOCAL_CPU_SIZE", "GiB per rank (LMCache)", per_rank, pinned, tokens,
                    tuple(notes), fix=TierFix("LMCACHE_MAX_LOCAL_CPU_SIZE", True, GiB, "rank",
                                              1 if first_only else ranks_node, True))


def offloading_connector_bytes(args: VLLMArgs) -> int | None:
    """``cpu_bytes_to_use`` of an ``OffloadingConnector`` the launch configures itself (what
    ``--kv-offloading-size`` sets for the whole engine from 0.14; KServe's ``kvCacheOffloading`` writes it), else
    None."""
    if args.connector != "OffloadingConnector":
        return None
    extra = (args.kv_transfer_config or {}).get("kv_connector_extra_config") or {}
    return int(extra["cpu_bytes_to_use"]) if "cpu_bytes_to_use" in extra else None


def native_tier(args: VLLMArgs, rules, bytes_per_block: int, block_size: int, ranks_node: int,
                mla_replicated: bool, total_bytes: int | None = None) -> HostTier:
    """The native CPU tier of ``--kv-offloading-size`` (or of ``total_bytes`` given as the connector's own
    ``cpu_bytes_to_use``: same tier, no flag to resize)."""
    total = int((args.kv_offloading_size or 0.0) * GiB) if total_bytes is None else total_bytes
    given = f"--kv-offloading-size {args.kv_offloading_size:g} GiB" if total_bytes is None else \
        f"OffloadingConnector cpu_bytes_to_use {total_bytes / GiB:g} GiB"
    world = args.world_size
    copies = 1 if mla_replicated else world  # MLA replicated layout keeps one copy for all TP ranks
    align = getattr(rules, "native_offload_chunk_align", 4096) or 1
    chunk = -(-bytes_per_block * copies // align) * align
    chunks = total // chunk if chunk else 0
    region = chunks * chunk
    slot = chunks * bytes_per_block  # each rank's slot of every chunk row (the whole row when replicated)
    ranks = min(ranks_node, world)
    notes = [f"{given} is the total for one engine, split over "
             f"{world} workers: {chunks:,} chunks × {chunk:,} B = {region / GiB:,.1f} GiB, "
             f"{chunks * block_size:,} CPU tokens" + (" (MLA: one copy shared by all TP ranks)" if copies == 1 else "")]
    shm, shared = 0, None
    if getattr(rules, "native_offload_shm", False):
        shm = shared = region
        per_rank = (region if copies == 1 else slot,) * ranks
        pinned = per_rank
        notes.append(f"one /dev/shm region of {region / GiB:,.1f} GiB (vllm_offload_<engine>.mmap) shared by the "
                     "node's workers; a container needs --shm-size or --ipc=host at least that large")
    elif getattr(rules, "native_offload_pinned_pow2", False):
        per_rank = (slot,) * ranks
        pinned = tuple(pow2(b) for b in per_rank)
        notes.append("pinned per worker with torch pin_memory (rounded up to powers of two; vLLM #53042: 1.92×)")
    else:
        per_rank = pinned = (slot,) * ranks
    flag = "--kv-offloading-size" if total_bytes is None else "--kv-transfer-config cpu_bytes_to_use"
    return HostTier("kv-offloading-native", flag, "GiB in total per engine (all TP×PP ranks)",
                    per_rank, pinned, chunks * block_size, tuple(notes), shm_bytes=shm, shared_bytes=shared,
                    fix=TierFix("--kv-offloading-size", False, GiB, "engine", 1, False) if total_bytes is None
                    else None,
                    given=None if total_bytes is None else f"{given} (in total for the engine)")


def cpu_offload_tier(args: VLLMArgs, ranks_node: int, weights_bytes_per_rank: int = 0) -> HostTier:
    """``--cpu-offload-gb`` per GPU: parameters are copied to pinned host memory until the budget is spent
    (``model_executor/models/utils.py::maybe_offload_to_cpu``, vLLM 0.11.0:
    https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/model_executor/models/utils.py), so a rank offloads
    min(request, its weights) (``weights_bytes_per_rank``; 0 = unknown: the request)."""
    asked = int(args.cpu_offload_gb * GiB)
    b = min(asked, weights_bytes_per_rank) if weights_bytes_per_rank > 0 else asked
    pinned = int(b * CPU_OFFLOAD_PIN_FACTOR)
    notes = ["weights offloaded to pinned host memory; host RSS observed up to ~1.9× the request "
             "(vLLM #56410, torch's pinned allocator)"]
    if b < asked:
        notes.append(f"only {b / GiB:,.1f} GiB of weights per rank to offload: the rest of the request stays unused")
    given = (f"--cpu-offload-gb {args.cpu_offload_gb:g} (GiB of weights per GPU; a rank has "
             f"{b / GiB:,.1f} GiB to offload)") if b < asked else None
    return HostTier("cpu-offload", "--cpu-offload-gb", "GiB of weights per GPU", (b,) * ranks_node,
                    (pinned,) * ranks_node, None, tuple(notes), given=given,
                    fix=TierFix("--cpu-offload-gb", False, GiB, "rank", ranks_node, False, CPU_OFFLOAD_PIN_FACTOR))


def swap_tier(args: VLLMArgs, ranks_node: int, bytes_per_block: int) -> HostTier:
    b = int((args.swap_space or 0.0) * GiB)
    blocks = b // bytes_per_block if bytes_per_block else 0
    return HostTier("swap-space", "--swap-space", "GiB per GPU (V0 pinned CPU blocks)", (b,) * ranks_node,
                    (b,) * ranks_node, None, (f"V0: {blocks:,} CPU blocks per worker",),
                    fix=TierFix("--swap-space", False, GiB, "rank", ranks_node, False))
