"""host-oversubscribed (error): the host KV tiers of all ranks on one node exceed what the node has.

Signals: per node, the pinned host tiers (SGLang HiCache pools, vLLM KV offloading / LMCache / CPU offload / swap)
sum to more than the node's available memory minus the reserve the engine (or kvplan) keeps for the OS.
Cause: the tier's size is per rank (or rounded up when pinned) while the user sized it as a total.
Fix: the engine's own resize of the largest tier (``settings.host_fix``), re-planned to fit.
Inside a container whose memory limit is at most the node's memory, the limit is the budget and
container-memory-limit reports it instead.
When the node's host memory is not given (a plan for other hardware), the rule says so (info) with what the node
needs: kvplan never checks another machine's tiers against this machine's memory.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding
from kvplan.units import GiB

ID = "host-oversubscribed"


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines import get_engine

    p, n = ctx.plan, ctx.plan.per_node
    if not n.host_kv_bytes:
        return []
    engine = get_engine(p.engine)
    parts = engine.describe_host_tiers(p)
    need = n.host_kv_bytes + n.host_reserve_bytes
    if n.host_available_bytes is None:
        msg = (f"host memory {n.host_available_source}: per node {'; '.join(parts)}; the node needs "
               f"at least {need / GiB:,.0f} GiB available ({n.host_kv_bytes / GiB:,.0f} GiB of host tiers + "
               f"{n.host_reserve_bytes / GiB:.0f} GiB OS reserve)")
        return [Finding(ID, "info", msg, "pass --host-mem-gib N (MemAvailable of one node) to check the host tiers")]
    if n.container_limit_bytes is not None and n.container_limit_bytes <= n.host_available_bytes:
        return []  # the container's limit binds before the node's memory: container-memory-limit reports it
    usable = n.host_available_bytes - n.host_reserve_bytes
    if n.host_kv_bytes <= usable:
        return []
    msg = (f"per node: {'; '.join(parts)}; total {n.host_kv_bytes / 1e12:.2f} TB ({n.host_kv_bytes / GiB:,.0f} GiB) "
           f"but the node has {n.host_available_bytes / GiB:,.0f} GiB available ({n.host_available_source}) and "
           f"{n.host_reserve_bytes / GiB:.0f} GiB stays free for the OS")
    refusal = engine.host_check_refuses(p)
    if refusal:
        msg += f"; {refusal}"
    else:
        msg += "; the ranks pin their pools until the host runs dry (the incident: silent hang, leaked RAM)"
    fix = p.settings.host_fix
    return [Finding(ID, "error", msg, fix.text if fix else "shrink the host tier", dict(fix.flags) if fix else {})]
