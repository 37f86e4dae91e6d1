"""host-check-blind (warning): this SGLang version checks each rank's host pool against the whole host, so TP ranks
all pass and oversubscribe together (fixed in 0.5.20 by PR #35540).

Signals: HiCache on, the version's host check is "whole-host-per-rank", 2+ ranks on the node.
Fix: size --hicache-size per rank from kvplan's per-node total, or SGLang >= 0.5.20.
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Finding
from kvplan.units import GB, GiB

ID = "host-check-blind"


def check(ctx: FindingContext) -> list[Finding]:
    p, n = ctx.plan, ctx.plan.per_node
    hc = sglang_settings(p).hicache
    if not hc.enabled or hc.host_check != "whole-host-per-rank" or n.ranks < 2:
        return []
    budget = hc.engine_budget_bytes_per_rank or 0
    msg = (f"SGLang {p.engine_version} checks each rank's host pool ({p.per_rank.host_kv_bytes / GB:,.2f} GB per "
           f"rank) against the whole host ({budget / GiB:,.0f} GiB after its 10 GiB reserve), not against "
           f"its share of {n.ranks} ranks on the node; it will not stop an oversubscribed launch itself")
    fix = "size --hicache-size per rank from kvplan's per-node total, or use SGLang >= 0.5.20 (split check)"
    return [Finding(ID, "warning", msg, fix)]
