"""hicache-prefix-only (info): the host tier extends the prefix cache; running requests still need their KV on the
GPU, so HiCache does not raise how many requests run at once.

Signals: HiCache on. Fix: for more concurrent requests, a larger GPU pool (fraction, fp8 KV, DP attention, GPUs).
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Finding
from kvplan.units import GB

ID = "hicache-prefix-only"


def check(ctx: FindingContext) -> list[Finding]:
    p = ctx.plan
    if not sglang_settings(p).hicache.enabled:
        return []
    r, rep = p.per_rank, p.per_replica
    msg = (f"the host tier holds {r.host_kv_tokens:,} tokens per rank ({r.host_kv_bytes / GB:,.1f} GB per rank) "
           f"of evicted prefixes for reuse; requests running at once still need their KV in the GPU pool of "
           f"{r.kv_tokens:,} tokens per rank: {rep.requests_fit} requests of {rep.avg_tokens:,} tokens per replica, "
           "with or without HiCache")
    return [Finding(ID, "info", msg,
                    "for more concurrent requests raise the GPU pool (mem fraction, fp8 KV, DP attention, more GPUs)")]
