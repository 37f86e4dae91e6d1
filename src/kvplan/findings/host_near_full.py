"""host-near-full (warning): the launch fits the node (and its container), but its host ledger's peak takes more than
90 % of the tighter of the two (kvplan.findings' scale: it starts, and a named risk is likely: the OS, page cache
and any other job on the node compete for the rest, and pinned memory cannot be swapped out).

Signals (``kvplan.ledger.judge``): the peak (steady or loading) > 90 % of min(available memory, container limit),
and neither host-oversubscribed nor container-memory-limit holds (they are errors). Not raised when neither is known.
The message names the biggest terms of the peak phase.
Fix: the engine's own resize of the largest tier (``settings.host_fix``: 0.8 of what is left after the reserve);
else the biggest term.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.ledger import NEAR_FULL, describe_peak, judge
from kvplan.result import Finding
from kvplan.units import GiB

ID = "host-near-full"
LIMIT = NEAR_FULL  # of the node's budget (the issue-13 scale: "host above 90 % of available")


def check(ctx: Context) -> list[Finding]:
    p, n = ctx.plan, ctx.plan.per_node
    if n.host_available_bytes is None and n.container_limit_bytes is None:
        return []
    j = judge(p)
    if not j.near_full:
        return []
    budget, source = j.ledger.budget or (0, "")
    share = j.peak.bytes / budget
    msg = (f"per node: {describe_peak(j, f' = {share:.1%} of the {budget / GiB:,.0f} GiB available ({source})')}; "
           f"it fits, but {(budget - j.peak.bytes) / GiB:,.1f} GiB is left for the OS and everything else on the node "
           "(pinned pages cannot be swapped out)")
    fix = p.settings.host_fix
    if fix is not None:
        return [Finding(ID, "warning", msg, fix.text, dict(fix.flags))]
    big = j.ledger.biggest(j.peak.phase, 1)
    return [Finding(ID, "warning", msg, f"shrink the biggest term ({big[0].what if big else 'the host tier'})")]
