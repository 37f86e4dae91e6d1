"""host-oversubscribed (error): the host KV pools of all ranks on one node exceed what the node has."""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding
from kvplan.units import GB, GiB

ID = "host-oversubscribed"


def check(ctx: Context) -> list[Finding]:
    p, n = ctx.plan, ctx.plan.per_node
    if not n.host_kv_bytes:
        return []
    usable = n.host_available_bytes - n.host_reserve_bytes
    if n.host_kv_bytes <= usable:
        return []
    from kvplan.engines.sglang.hicache import largest_fitting_size_gb

    hc = p.settings.get("hicache", {})
    per_rank = p.per_rank.host_kv_pinned_bytes
    size = largest_fitting_size_gb(n.host_available_bytes, n.ranks, bool(hc.get("pinned_pow2")))
    pinned = " (pinned, rounded up to a power of two)" if per_rank != p.per_rank.host_kv_bytes else ""
    msg = (f"per node: {n.ranks} ranks × {per_rank / GB:,.2f} GB per rank{pinned} = {n.host_kv_bytes / 1e12:.2f} TB "
           f"({n.host_kv_bytes / GiB:,.0f} GiB) of host KV, but the node has {n.host_available_bytes / GiB:,.0f} GiB "
           f"available ({n.host_available_source}) and SGLang keeps {n.host_reserve_bytes / GiB:.0f} GiB free; "
           f"{hc.get('sizing', '')} is per rank, not a total")
    if hc.get("engine_check_passes") is False:
        msg += "; this SGLang version refuses to start ('Not enough host memory available')"
    else:
        msg += "; the ranks pin their pools until the host runs dry (the incident: silent hang, leaked RAM)"
    fix = (f"--hicache-size {size} (decimal GB per rank: {size} × {n.ranks} = {size * n.ranks} GB per node, "
           f"SGLang 0.5.23's own 0.8 share of the host after its 10 GiB reserve)")
    flags: dict[str, str | None] = {"--hicache-size": str(size), "--hicache-ratio": None}
    if size <= 0:
        fix = "the host has no room for a host KV tier: drop --enable-hierarchical-cache"
        flags = {"--enable-hierarchical-cache": None, "--hicache-size": None, "--hicache-ratio": None}
    return [Finding(ID, "error", msg, fix, flags)]
