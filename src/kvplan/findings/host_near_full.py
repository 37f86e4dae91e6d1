"""host-near-full (warning): the host tiers fit the node, but leave it with little memory: after the pools are
pinned, they take more than 90 % of the node's available host memory (kvplan.findings' scale: it starts, and a named
risk is likely: the OS, the tokenizer/detokenizer processes, page cache and any other job on the node compete for the
rest, and pinned memory cannot be swapped out).

Signals: per node, host tiers > 90 % of the available memory, and they fit within available − the OS reserve
(else host-oversubscribed, an error). Not raised when the node's memory is not given.
Fix: the engine's own resize of the largest tier (``settings.host_fix``: 0.8 of what is left after the reserve).
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding
from kvplan.units import GiB

ID = "host-near-full"
LIMIT = 0.90  # of the node's available host memory (the issue-13 scale: "host above 90 % of available")


def check(ctx: Context) -> list[Finding]:
    p, n = ctx.plan, ctx.plan.per_node
    if not n.host_kv_bytes or n.host_available_bytes is None:
        return []
    usable = n.host_available_bytes - n.host_reserve_bytes
    if n.host_kv_bytes > usable or n.host_kv_bytes <= LIMIT * n.host_available_bytes:
        return []
    share = n.host_kv_bytes / n.host_available_bytes
    msg = (f"per node: host tiers {n.host_kv_bytes / GiB:,.0f} GiB = {share:.1%} of the "
           f"{n.host_available_bytes / GiB:,.0f} GiB available ({n.host_available_source}); it fits, but "
           f"{(n.host_available_bytes - n.host_kv_bytes) / GiB:,.1f} GiB is left for the OS and everything else on "
           "the node (pinned pages cannot be swapped out)")
    fix = p.settings.host_fix
    if fix is None:
        return [Finding(ID, "warning", msg, "shrink the host tier")]
    return [Finding(ID, "warning", msg, fix.text, dict(fix.flags))]
