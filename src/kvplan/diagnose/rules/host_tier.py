"""host-tier: the host KV tier is the limit. Signals: the host pool (vLLM V0 swap space 'CPU KV cache usage',
SGLang HiCache host pool used/total tokens, HiSparse cpu token usage) is >= 95 % full, so swapped-out or
offloaded KV has nowhere to go. Fix: a larger host tier (within host memory: kvplan check), or fewer long
requests."""

from __future__ import annotations

from kvplan.diagnose.rules import RuleContext, Verdict, pct

ID = "host-tier"
FULL = 0.95


def check(ctx: RuleContext) -> Verdict | None:
    w = ctx.window
    if w.host_usage_max is None or w.host_usage_max < FULL:
        return None
    ev = [f"host KV tier {pct(w.host_usage_max)} full at peak ({w.scope})"]
    if w.swapped_max:
        ev.append(f"{w.swapped_max} request(s) swapped out to host memory while {w.running or 0:.0f} run")
    if w.usage is not None:
        ev.append(f"device KV pool usage {w.usage:.2f} (mean)")
    return Verdict(ID, "the host KV tier is full: swapped or offloaded KV cannot be kept",
                   "a larger host tier that fits the node (--swap-space / --hicache-size: check it with kvplan "
                   "check), or more device KV (levers)", tuple(ev))
