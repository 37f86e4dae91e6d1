"""SGLang's figures in words: the HiCache host tier as host-oversubscribed quotes it, and the per-rank rows of the
human report (static pool, KV pool, what is left outside it)."""

from __future__ import annotations

from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Plan


def host_tiers(plan: Plan) -> list[str]:
    s, r, n = sglang_settings(plan), plan.per_rank, plan.per_node
    if not s.hicache.enabled:
        return []
    pinned = " (pinned, rounded up to a power of two)" if r.host_kv_pinned_bytes != r.host_kv_bytes else ""
    return [f"{n.ranks} ranks × {r.host_kv_pinned_bytes / 1e9:,.2f} GB per rank{pinned} "
            f"({s.host_sizing}, per rank, not a total)"]


def host_refusal(plan: Plan) -> str | None:
    hc = sglang_settings(plan).hicache
    if hc.enabled and not hc.engine_check_passes:
        return "this SGLang version refuses to start ('Not enough host memory available')"
    return None
