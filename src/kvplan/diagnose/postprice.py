"""What diagnose does with the priced levers before it shows them: throughput capped by the step times the window
shows, and no launch change offered as a fix to a client-bound server.

Step time. A decode step reads every weight of the rank once and the KV cache of every running request, so it grows
with the batch: with ``W`` weight bytes per rank, ``c`` KV bytes per token per rank and requests of ``a`` tokens in
flight, a step of ``b`` running requests per DP group / engine moves ``W + b·a·c`` bytes. Anchored on the step the
window shows (``t_obs = running / generation rate`` at ``b_obs`` running), decode being memory-bound:

    t(b) = t_obs × (W + b·a·c) / (W + b_obs·a·c)

so a lever that lets ``b`` requests run generates ``b / t(b)`` tokens per second per group, not ``b / t_obs``: the
linear estimate times ``(W + b_obs·a·c) / (W + b·a·c)``. Where ``b`` is past the largest batch the window saw, the
figure is an extrapolation and says so. The current launch's ``W`` and ``c`` are used for every lever (a lever that
reads fewer bytes per token, fp8 KV, is capped a little harder than it would be). Levers whose rate already follows
the window's fitted fall of the per-request rate are left as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.diagnose.levers import Lever
    from kvplan.diagnose.window import Window
    from kvplan.result import Plan

CLIENT_BOUND = "client-bound"


def step_factor(plan: Plan, w: Window, batch: float) -> float | None:
    """``t_obs / t(batch)`` (≤ 1 past the observed batch), per DP group / engine; None when the window lacks it."""
    if not w.running or not w.tokens_in_use and w.usage is None:
        return None
    groups = max(1, len(w.sources))
    a = (w.tokens_in_use / w.running) if w.tokens_in_use else None
    if a is None:
        return None
    weights, cell = plan.per_rank.weights_bytes, plan.per_rank.kv_bytes_per_token
    if weights <= 0 or cell <= 0:
        return None
    b_obs = w.running / groups
    b = batch / groups
    return (weights + b_obs * a * cell) / (weights + b * a * cell)


def cap_by_step_time(levers: list[Lever], w: Window, plan: Plan | None) -> list[str]:
    """Cap each lever's expected tok/s by the step-time model; returns notes."""
    if plan is None or not w.running or not w.gen_tps:
        return []
    per_req = w.gen_tps / w.running
    seen = w.running_max or w.running
    notes: list[str] = []
    for lv in levers:
        if lv.expected_gen_tps is None or lv.name == "current" or "fitted" in lv.gen_tps_basis:
            continue
        conc = lv.expected_gen_tps / max(1, lv.replicas) / per_req  # running per replica the estimate assumed
        f = step_factor(plan, w, conc)
        if f is None or f >= 1.0:
            continue
        capped = lv.expected_gen_tps * f
        extra = (f"; step time grows with the batch (weights + KV read per step): {w.running:.0f} -> {conc:.0f} "
                 f"running per replica makes each step {1 / f:.2f}× longer, {lv.expected_gen_tps:.0f} -> "
                 f"{capped:.0f} tok/s")
        if conc > seen:
            extra += f" (extrapolated: the window saw at most {seen:.0f} running)"
        lv.expected_gen_tps, lv.gen_tps_basis = capped, lv.gen_tps_basis + extra
    if any("step time grows" in lv.gen_tps_basis for lv in levers):
        notes.append("lever tok/s capped by the decode step time the window shows, grown for the larger batch "
                     "(memory-bound: weights + KV read per step)")
    return notes


def no_launch_fixes(levers: list[Lever], bottleneck: str) -> list[str]:
    """A client-bound server keeps only ``current``: no launch change raises what the client does not send."""
    if bottleneck != CLIENT_BOUND or len(levers) <= 1:
        return []
    names = ", ".join(lv.name for lv in levers[1:])
    del levers[1:]
    return [f"levers not offered ({names}): the server is client-bound (nothing waits, the pool has room); the fix "
            "is the client's concurrency, not the launch"]
