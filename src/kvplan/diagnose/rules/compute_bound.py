"""compute-bound: the GPU's step time is the limit. Signals, with the pool below 85 % used and requests running:
the per-request generation rate falls by >= 20 % as the batch grows across the window (>= 3 samples, the batch
spanning >= 1.5x), or requests wait although the pool has room (admission is held by the batch and prefill
budget, not by KV) and the free pool could hold one more request. Fix: more GPUs / replicas; more KV does not help."""

from __future__ import annotations

from kvplan.diagnose.rules import RuleContext, Verdict, one_request_free, usage_range

ID = "compute-bound"
ROOM, DROP = 0.85, 0.20


def check(ctx: RuleContext) -> Verdict | None:
    w = ctx.window
    if not w.running or (w.usage_max is not None and w.usage_max >= ROOM):
        return None
    room = one_request_free(w)
    if room is not None and room[0] < room[1]:
        return None  # the free pool cannot hold one more request: that is KV, not compute
    ev: list[str] = []
    sl = w.rate_slope
    if sl is not None and sl[2] > 0 and (sl[2] - sl[3]) / sl[2] >= DROP:
        ev.append(f"per-request generation falls from {sl[2]:.1f} tok/s at {sl[0]} running to {sl[3]:.1f} tok/s "
                  f"at {sl[1]} running ({w.scope})")
    if (w.queued or 0) >= 1:
        ev.append(f"{w.queued:.0f} request(s) wait on average while {w.running:.0f} run and the pool has room "
                  f"({usage_range(w)}): admission is held by the batch / prefill budget, not by KV")
    if not ev:
        return None
    if w.per_request_tps is not None:
        ev.append(f"{w.gen_tps or 0:.0f} tok/s generated, {w.per_request_tps:.1f} tok/s per running request")
    if w.accept_len is not None:
        ev.append(f"speculative decoding accept length {w.accept_len:.2f}")
    return Verdict(ID, "the step time grows with the batch: compute (or the scheduler), not KV, limits throughput",
                   "more GPUs or replicas; more KV tokens will not raise throughput", tuple(ev))
