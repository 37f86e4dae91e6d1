"""host-oversubscribed (error): one node's host memory cannot hold the launch.

Signals (``kvplan.ledger.judge``): the host ledger's peak (steady or loading: every rank's process, the tokenizer
and detokenizer, communicators, queues, the pinned host tiers, a CPU platform's weights and KV cache) exceeds the
node's available memory; or the pinned host tiers alone exceed it minus the reserve the engine (SGLang's HiCache
10 GiB) or kvplan (10 GiB beside vLLM's tiers) keeps for the OS.
Cause: a tier sized per rank (or rounded up when pinned) while the user sized it as a total; or the terms beside the
tiers forgotten. The message names the biggest terms of the peak phase.
Fix: the engine's own resize of the largest tier (``settings.host_fix``), re-planned to fit; else the biggest term.
Inside a container whose memory limit is at most the node's memory, the limit is the budget and
container-memory-limit reports it instead.
When the node's host memory is not given (a plan for other hardware), the rule says so (info) with what the node
needs: kvplan never checks another machine's tiers against this machine's memory.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.ledger import describe_peak, judge
from kvplan.result import Finding
from kvplan.units import GiB, fmt_host

ID = "host-oversubscribed"


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines import get_engine

    p, n = ctx.plan, ctx.plan.per_node
    if not n.host_kv_bytes and n.host_available_bytes is None:
        return []
    j = judge(p)
    engine = get_engine(p.engine)
    parts = engine.describe_host_tiers(p)
    tiers = f"per node: {'; '.join(parts)}; " if parts else "per node: "
    if n.host_available_bytes is None:
        msg = (f"host memory {n.host_available_source}: {tiers}the node needs at least "
               f"{j.peak.bytes / GiB:,.0f} GiB available ({describe_peak(j)})")
        return [Finding(ID, "info", msg, "pass --host-mem-gib N (MemAvailable of one node) to check the host tiers")]
    if n.container_limit_bytes is not None and n.container_limit_bytes <= n.host_available_bytes:
        return []  # the container's limit binds before the node's memory: container-memory-limit reports it
    if not j.over_node:
        return []
    avail = n.host_available_bytes
    msg = f"{tiers}{describe_peak(j)}"
    if n.host_kv_bytes:
        msg += f"; host tiers {fmt_host(n.host_kv_bytes)}"
    msg += f"; the node has {avail / GiB:,.0f} GiB available ({n.host_available_source})"
    if n.host_reserve_bytes:
        msg += f" and {n.host_reserve_bytes / GiB:.0f} GiB stays free for the OS"
    refusal = engine.host_check_refuses(p)
    if refusal:
        msg += f"; {refusal}"
    elif n.host_kv_bytes:
        msg += "; the ranks pin their pools until the host runs dry (the incident: silent hang, leaked RAM)"
    else:
        msg += "; the kernel's OOM killer ends it"
    fix = p.settings.host_fix
    if fix is not None:
        return [Finding(ID, "error", msg, fix.text, dict(fix.flags))]
    big = j.ledger.biggest(j.peak.phase, 1)
    what = big[0].what if big else "the host tier"
    return [Finding(ID, "error", msg, f"shrink the biggest term ({what}), or a node with more memory")]
