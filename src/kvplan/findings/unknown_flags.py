"""unknown-flags (info): flags kvplan kept but does not model, and features whose memory it does not size."""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding

ID = "unknown-flags"


def check(ctx: Context) -> list[Finding]:
    s = ctx.plan.settings
    out = []
    if s.get("unknown_flags"):
        flags = ", ".join(s["unknown_flags"])
        out.append(Finding(ID, "info", f"flags kvplan does not model (kept as given): {flags}",
                           "check that they do not change GPU or host memory"))
    if s.get("unmodeled"):
        what = ", ".join(s["unmodeled"])
        out.append(Finding("unmodeled-memory", "warning", f"this launch uses {what}; kvplan does not size it, "
                           "so KV figures are an upper bound", "pass --weights-gib with the per-rank total if known"))
    return out
