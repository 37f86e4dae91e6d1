"""HiCache host pools: per rank, decimal GB, page-rounded, pinned, and the engine's own host check.

Sizing: ``mem_cache/pool_host/base.py::HostKVCache.__init__`` (0.5.23; ``memory_pool_host.py`` up to 0.5.9)::

    tokens = int(hicache_size × 1e9 // bytes_per_token)  if --hicache-size > 0   (decimal GB, per rank)
           = int(device_tokens × hicache_ratio)          otherwise (ratio 2.0 by default)
    tokens = (tokens // page + 1) × page                 (0.4.6: tokens // page × page)

The check: each rank compares its own request with ``available − 10 GiB`` before 0.5.20 (so all TP ranks pass
together and oversubscribe the host); 0.5.20 divides that by the ranks on the host (PR #35540); 0.5.23 also
caps ``available`` by the cgroup headroom and, with no ratio or size given, fits the ratio itself
(``hicache_auto_size.py``: 0.8 of the per-rank budget, 5 % slack).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.engines.sglang.args import SGLangArgs
from kvplan.engines.sglang.rules import SGLangRules
from kvplan.units import GB, GiB

HOST_RESERVE_BYTES = 10 * GiB  # HICACHE_HOST_MEMORY_RESERVE_BYTES (all versions read)
AUTO_FRACTION = 0.8  # --hicache-host-memory-fraction default (0.5.23)


@dataclass(frozen=True)
class HostPool:
    enabled: bool
    bytes_per_token: int = 0
    tokens: int = 0
    bytes: int = 0  # per rank, as the engine sizes it
    pinned_bytes: int = 0  # per rank, what the allocator pins
    ratio: float | None = None
    size_gb: float | None = None
    sizing: str = ""
    engine_budget_bytes: int | None = None  # per rank: what this rank's own check compares against
    engine_check_passes: bool = True


def engine_budget(rules: SGLangRules, host_available: int | None, ranks_per_host: int) -> int | None:
    """The number one rank's host check compares its request with (bytes; None when the host is unknown)."""
    if host_available is None:
        return None
    budget = host_available - HOST_RESERVE_BYTES
    if rules.host_check != "whole-host-per-rank":
        budget //= max(1, ranks_per_host)
    return budget


def plan_host(args: SGLangArgs, rules: SGLangRules, device_tokens: int, bytes_per_token: int, page: int,
              host_available: int | None, ranks_per_host: int) -> HostPool:
    """The host pool of one rank; ``host_available`` (one node, bytes) None when the node's memory is not known."""
    offload = args.disaggregation_decode_enable_offload_kvcache  # pd.py: the same HostKVCache on the decode side
    if not (args.enable_hierarchical_cache or offload):
        return HostPool(enabled=False)
    budget = engine_budget(rules, host_available, ranks_per_host)
    ratio = args.hicache_ratio
    if args.hicache_size and args.hicache_size > 0:
        tokens = int(args.hicache_size * GB // bytes_per_token)
        sizing = f"--hicache-size {args.hicache_size:g} (decimal GB per rank)"
        ratio = None
    else:
        if ratio is None and rules.hicache_auto_size and budget is None:
            ratio = 2.0  # the auto-size's cap: the node's memory is not given, so the largest ratio it can pick
            sizing = "auto-sized ratio, host memory not given: its cap 2.0 assumed (0.5.23 hicache_auto_size.py)"
        elif ratio is None and rules.hicache_auto_size:
            frac = args.hicache_host_memory_fraction or AUTO_FRACTION
            device_bytes = device_tokens * bytes_per_token
            fit = ((budget or 0) * frac * 0.95 / device_bytes) if device_bytes else 0.0
            ratio = min(2.0, fit)
            sizing = f"auto-sized ratio {ratio:.3f} (0.5.23: {frac:g} of the per-rank host budget)"
        else:
            ratio = 2.0 if ratio is None else ratio
            sizing = f"--hicache-ratio {ratio:g} × device tokens"
        tokens = int(device_tokens * max(ratio, 0.0))
    if rules.host_tokens_round_down:
        tokens = tokens // page * page
    else:
        tokens = (tokens // page + 1) * page
    n_bytes = tokens * bytes_per_token
    if offload and not args.enable_hierarchical_cache:
        sizing = f"PD decode-side offload (DecodeKVCacheOffloadManager): {sizing}"
    pinned = 1 << math.ceil(math.log2(n_bytes)) if (rules.host_pool_pinned_pow2 and n_bytes > 0) else n_bytes
    return HostPool(enabled=True, bytes_per_token=bytes_per_token, tokens=tokens, bytes=n_bytes,
                    pinned_bytes=pinned, ratio=ratio, size_gb=args.hicache_size or None, sizing=sizing,
                    engine_budget_bytes=budget, engine_check_passes=budget is None or n_bytes <= budget)


def largest_fitting_size_gb(host_available: int, ranks_per_host: int, pinned_pow2: bool) -> int:
    """Largest whole ``--hicache-size`` (decimal GB per rank) that fits the node with the engine's reserve.

    Uses SGLang 0.5.23's own auto-sizing policy: 0.8 of (available − 10 GiB) / ranks on the host.
    """
    per_rank = (host_available - HOST_RESERVE_BYTES) / max(1, ranks_per_host) * AUTO_FRACTION
    if pinned_pow2 and per_rank > 0:  # torch's pinned allocator rounds each pool up to a power of two
        per_rank = (1 << int(math.floor(math.log2(per_rank)))) * 0.98  # stay under the power of two
    return max(0, int(per_rank // GB))
