"""host-oversubscribed (error): the host pools of all ranks on one node exceed what the node has."""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding
from kvplan.units import GiB

ID = "host-oversubscribed"


def check(ctx: Context) -> list[Finding]:
    p, n = ctx.plan, ctx.plan.per_node
    if not n.host_kv_bytes:
        return []
    usable = n.host_available_bytes - n.host_reserve_bytes
    if n.host_kv_bytes <= usable:
        return []
    s = p.settings
    parts = []
    if s.get("hicache", {}).get("enabled"):
        r = p.per_rank
        pinned = " (pinned, rounded up to a power of two)" if r.host_kv_pinned_bytes != r.host_kv_bytes else ""
        parts.append(f"{n.ranks} ranks × {r.host_kv_pinned_bytes / 1e9:,.2f} GB per rank{pinned} "
                     f"({s.get('host_sizing', '')}, per rank, not a total)")
    for t in s.get("host_tiers", []):
        ranks = sum(1 for b in t["pinned_per_rank_bytes"] if b)
        asked = max(t["per_rank_bytes"], default=0)
        each = max(t["pinned_per_rank_bytes"], default=0)
        pinned = f", pinned up to {each / GiB:,.1f} GiB" if each != asked else ""
        shared = " (one region shared by the node's ranks)" if t.get("shared") else f" on {ranks} rank(s)"
        parts.append(f"{t['flag']}={asked / GiB:,.1f} GiB ({t['meaning']}){pinned}{shared} -> "
                     f"{t['node_bytes'] / GiB:,.1f} GiB on the node")
    msg = (f"per node: {'; '.join(parts)}; total {n.host_kv_bytes / 1e12:.2f} TB ({n.host_kv_bytes / GiB:,.0f} GiB) "
           f"but the node has {n.host_available_bytes / GiB:,.0f} GiB available ({n.host_available_source}) and "
           f"{n.host_reserve_bytes / GiB:.0f} GiB stays free for the OS")
    hc = s.get("hicache", {})
    if hc.get("enabled") and hc.get("engine_check_passes") is False:
        msg += "; this SGLang version refuses to start ('Not enough host memory available')"
    else:
        msg += "; the ranks pin their pools until the host runs dry (the incident: silent hang, leaked RAM)"
    fix = s.get("host_fix") or {}
    return [Finding(ID, "error", msg, fix.get("text", "shrink the host tier"), dict(fix.get("flags", {})))]
