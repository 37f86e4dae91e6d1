"""host-check-blind (warning): this SGLang version checks each rank's host pool against the whole host,
so TP ranks all pass and oversubscribe together (fixed in 0.5.20 by PR #35540)."""

from __future__ import annotations

from kvplan.engines.base import FindingContext as Context
from kvplan.result import Finding
from kvplan.units import GB, GiB

ID = "host-check-blind"


def check(ctx: Context) -> list[Finding]:
    p, n = ctx.plan, ctx.plan.per_node
    hc = p.settings.get("hicache", {})
    if not hc.get("enabled") or hc.get("host_check") != "whole-host-per-rank" or n.ranks < 2:
        return []
    budget = hc.get("engine_budget_bytes_per_rank") or 0
    msg = (f"SGLang {p.engine_version} checks each rank's host pool ({p.per_rank.host_kv_bytes / GB:,.2f} GB per "
           f"rank) against the whole host ({budget / GiB:,.0f} GiB after its 10 GiB reserve), not against "
           f"its share of {n.ranks} ranks on the node; it will not stop an oversubscribed launch itself")
    fix = "size --hicache-size per rank from kvplan's per-node total, or use SGLang >= 0.5.20 (split check)"
    return [Finding(ID, "warning", msg, fix)]
