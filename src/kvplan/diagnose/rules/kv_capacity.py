"""kv-capacity: the KV pool is the limit. Signals: preemptions or retractions in the window; or requests wait
while the pool is nearly full (usage >= 0.85 on average or >= 0.90 at peak), or while its free part cannot hold
one more request of the observed in-flight size; or nothing waits yet but the pool is >= 90 % full on average
with 2+ running (the edge: the running requests grow into the rest). Fix: more KV tokens per replica (the levers
table prices each)."""

from __future__ import annotations

from kvplan.diagnose.rules import RuleContext, Verdict, one_request_free, pct, usage_range

ID = "kv-capacity"
FULL_MEAN, FULL_PEAK, EDGE = 0.85, 0.90, 0.90
FIX = "more KV tokens per replica: see the levers (fraction, fp8 KV, DP attention, replicas)"


def check(ctx: RuleContext) -> Verdict | None:
    w, ev = ctx.window, []
    scope = f" ({w.scope})"
    pool = f" of {ctx.pool_tokens:,} KV tokens {ctx.pool_scope}".rstrip() if ctx.pool_tokens else ""
    if w.preemptions or w.retractions:
        if w.preemptions:
            ev.append(f"{w.preemptions} preemption(s) in the window: running requests lost their KV blocks and "
                      f"are recomputed or swapped{scope}")
        if w.retractions:
            ev.append(f"{w.retractions} request(s) retracted: 'KV cache pool is full. Retract requests'{scope}")
        if w.usage is not None:
            ev.append(f"{usage_range(w)}{pool}")
        return Verdict(ID, "the KV pool cannot hold the running requests as they grow", FIX, tuple(ev))
    if w.usage is None or w.running is None:
        return None
    room = one_request_free(w)
    no_room = room is not None and room[0] < room[1]
    waiting = (w.queued or 0) >= 1
    full = w.usage >= FULL_MEAN or (w.usage_max or 0) >= FULL_PEAK
    if waiting and (full or no_room):
        ev.append(f"{w.queued:.0f} request(s) wait on average (max {w.queued_max}) while {w.running:.0f} run: "
                  f"{usage_range(w)}{pool}{scope}")
        if room is not None:
            ev.append(f"free pool {pct(room[0])} vs {pct(room[1])} held by one running request on average: the "
                      "scheduler cannot admit the queue")
        if ctx.max_running and w.running_max is not None and w.running_max < ctx.max_running:
            ev.append(f"running stays below the engine's cap ({w.running_max} < max running {ctx.max_running}): "
                      "the cap is not what holds requests back")
        return Verdict(ID, "requests wait because the KV pool is full", FIX, tuple(ev))
    if not waiting and w.usage >= EDGE and w.running >= 2 and room is not None:
        ev.append(f"nothing waits yet, but {usage_range(w)}{pool} with {w.running:.0f} running{scope}")
        ev.append(f"free pool {pct(room[0])} vs {pct(room[1])} held by one running request: the requests grow "
                  "into it, the next arrivals wait and growing requests get preempted")
        return Verdict(ID, "the KV pool is at its edge: one more request of the observed size does not fit",
                       FIX, tuple(ev))
    return None
