"""running-cap: the engine's max running requests is the limit, not KV. Signals: running reaches the known cap
(SGLang max_running_requests per DP worker x groups, vLLM max_num_seqs) while >= 1 request waits on average and
the pool is below 85 % used. Fix: raise --max-running-requests / --max-num-seqs."""

from __future__ import annotations

from kvplan.diagnose.rules import RuleContext, Verdict, usage_range

ID = "running-cap"
ROOM = 0.85


def check(ctx: RuleContext) -> Verdict | None:
    w, cap = ctx.window, ctx.max_running
    if not cap or w.running_max is None or w.running_max < 0.95 * cap or (w.queued or 0) < 1:
        return None
    if w.usage is not None and w.usage >= ROOM:
        return None
    ev = [f"running reaches the engine's cap ({w.running_max} of max {cap}) while {w.queued:.0f} wait on "
          f"average ({w.scope})", f"{usage_range(w)}: the pool has room"]
    return Verdict(ID, "the engine's max running requests holds the queue back, the KV pool has room",
                   "raise --max-running-requests (SGLang) / --max-num-seqs (vLLM)", tuple(ev))
