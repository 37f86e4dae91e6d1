"""host-check-race (warning): the node's ranks each read the host's free memory when they reach HiCache's check, not
once before any of them allocates, so a rank that comes after its peers have pinned their pools can refuse a launch
that fits (sglang issue #38156, open; the fix proposed in PR #38157 reads it once per TP group).

The check of the split versions (0.5.19+, PR #35540: ``mem_cache/pool_host/base.py::host_memory_budget_bytes``)::

    budget per rank = (psutil available − 10 GiB) // ranks_per_host          ranks_per_host = world_size // nnodes

is right for a reading taken before any co-located rank allocates. A rank that reads it after k peers pinned
their pools sees ``available`` lower by k × pool and still divides by every rank: the peers are charged twice. The
last of N ranks, after N − 1 peers, passes only when

    pool <= (A − 10 GiB − (N − 1) × pool) / N,   i.e.   (2N − 1) × pool <= A − 10 GiB

(A: the free memory before the launch). Ranks reach the check seconds apart and pinning a large pool takes longer,
so a launch between that bound and the first rank's (N × pool <= A − 10 GiB) starts or not by timing.
Signals: HiCache on with an explicit --hicache-size or --hicache-ratio (0.5.21+ auto-sizing builds every pool from
one snapshot after a MIN all-reduce, PR #40135), a split check, 2+ ranks on the node, the node's memory known, the
first rank's check passes and the last one's does not. The versions before 0.5.19 have the other side of the same
race (host-check-blind: every rank reads the same free memory and they all pass).
Fix: a --hicache-size that the last rank's reading also holds: pool <= (A − 10 GiB) / (2N − 1).
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Finding
from kvplan.units import GB, GiB

ID = "host-check-race"


def check(ctx: FindingContext) -> list[Finding]:
    p, n, r = ctx.plan, ctx.plan.per_node, ctx.plan.per_rank
    hc = sglang_settings(p).hicache
    ranks, budget = n.ranks, hc.engine_budget_bytes_per_rank
    if (not hc.enabled or hc.host_check == "whole-host-per-rank" or ranks < 2 or budget is None
            or not hc.engine_check_passes or hc.sizing.startswith("auto-sized")):
        return []
    free = budget * ranks  # A − 10 GiB as the engine reads it (min with the cgroup's headroom from 0.5.21)
    pool, pinned = r.host_kv_bytes, r.host_kv_pinned_bytes or r.host_kv_bytes
    last = (free - (ranks - 1) * pinned) // ranks
    if pool <= last:
        return []
    most_gb = int(free / (2 * ranks - 1) / GB)
    msg = (f"SGLang {p.engine_version}: each of the {ranks} ranks on the node reads the free host memory when it "
           f"reaches HiCache's check, not once before any of them allocates (sglang #38156): the first one's share "
           f"is {budget / GiB:,.1f} GiB for a {pool / GiB:,.1f} GiB pool per rank, the last one's, after "
           f"{'its peer' if ranks == 2 else f'its {ranks - 1} peers'} pinned theirs, ({free / GiB:,.1f} − "
           f"{ranks - 1} × {pinned / GiB:,.1f}) / {ranks} = "
           f"{last / GiB:,.1f} GiB: the launch fits, but it may fail to start ('Not enough host memory available'), "
           "depending on when each rank reaches the check")
    fix = (f"--hicache-size {most_gb} (GB per rank) or less: (2 × {ranks} − 1) pools within the "
           f"{free / GiB:,.1f} GiB the check divides, so the last rank passes too")
    return [Finding(ID, "warning", msg, fix)]
