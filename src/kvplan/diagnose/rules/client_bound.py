"""client-bound: the client sends too little. Signals: nothing waits (mean queue < 0.5, peak <= 1), the pool has
room (peak usage < 90 %), no preemption. Fix: send more concurrent requests (raise the client's concurrency);
server levers do not raise throughput."""

from __future__ import annotations

from kvplan.diagnose.rules import RuleContext, Verdict, usage_range

ID = "client-bound"
ROOM = 0.90


def check(ctx: RuleContext) -> Verdict | None:
    w = ctx.window
    if w.queued is None or w.running is None or w.preemptions or w.retractions:
        return None
    if w.queued >= 0.5 or (w.queued_max or 0) > 1:
        return None
    if w.usage_max is not None and w.usage_max >= ROOM:
        return None
    ev = [f"nothing waits (queue mean {w.queued:.1f}, max {w.queued_max}) with {w.running:.1f} running on average "
          f"(max {w.running_max}) ({w.scope})", f"{usage_range(w)}: the pool has room"]
    if w.gen_tps is not None:
        ev.append(f"{w.gen_tps:.0f} tok/s generated" + (f", {w.per_request_tps:.1f} tok/s per running request"
                                                       if w.per_request_tps else ""))
    idle = "the server is idle" if not w.running_max else f"at most {w.running_max} requests arrive at once"
    return Verdict(ID, f"the client sends too little: {idle}",
                   "raise the client's concurrency (more requests in flight); server levers add no throughput",
                   tuple(ev))
