"""host-check-blind: this SGLang version checks each rank's host pool against the whole host, so TP ranks all pass
and oversubscribe together: each reads the same free memory (psutil available) before any of them allocates (fixed
in 0.5.20 by PR #35540, which splits it by the ranks; the split's own race, a late rank charged for its peers'
pools: host-check-race).

Signals: HiCache on, the version's host check is "whole-host-per-rank", 2+ ranks on the node.
Severity (kvplan.findings' scale): **error** when the node is oversubscribed (the engine will not stop the launch:
the incident's silent hang); **info** otherwise (good to know: nothing guards this launch if it is resized).
Fix: size --hicache-size per rank from kvplan's per-node total (the host fix when oversubscribed), or SGLang >= 0.5.20.
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Finding
from kvplan.units import GB, GiB

ID = "host-check-blind"


def check(ctx: FindingContext) -> list[Finding]:
    p, n = ctx.plan, ctx.plan.per_node
    s = sglang_settings(p)
    hc = s.hicache
    if not hc.enabled or hc.host_check != "whole-host-per-rank" or n.ranks < 2:
        return []
    usable = n.host_usable_bytes
    over = usable is not None and n.host_kv_bytes > usable
    budget = (f"the whole host ({hc.engine_budget_bytes_per_rank / GiB:,.0f} GiB after its 10 GiB reserve)"
              if hc.engine_budget_bytes_per_rank is not None else "the whole host")
    msg = (f"SGLang {p.engine_version} checks each rank's host pool ({p.per_rank.host_kv_bytes / GB:,.2f} GB per "
           f"rank) against {budget}, not against its share of {n.ranks} ranks on the node: the {n.ranks} ranks each "
           "read the same free memory before any of them allocates, so they all pass together (PR #35540)")
    if over:
        msg += ("; this launch oversubscribes the node and the engine will not stop it: the ranks pin host memory "
                "until the node hangs")
        fix = s.host_fix
        if fix is not None:
            return [Finding(ID, "error", msg, fix.text, dict(fix.flags))]
        return [Finding(ID, "error", msg, "shrink --hicache-size per rank, or use SGLang >= 0.5.20 (split check)")]
    msg += ("; host memory not given, so kvplan cannot tell whether this launch fits, and the engine would not "
            "stop it if it does not" if usable is None else
            "; this launch fits, but the engine would not stop an oversubscribed one")
    fix_text = "size --hicache-size per rank from kvplan's per-node total, or use SGLang >= 0.5.20 (split check)"
    return [Finding(ID, "info", msg, fix_text)]
