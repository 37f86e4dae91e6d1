"""unknown-flags (info): flags kvplan kept but does not model; unmodeled-memory (warning): features whose memory it
does not size (speculative decoding, LoRA, ...), so the KV figures are an upper bound.

Signals: the engine's parser kept flags it has no entry for, or flagged a feature as unmodelled.
Fix: check that they do not change GPU or host memory; ``--weights-gib`` with the per-rank total if known.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding

ID = "unknown-flags"


def check(ctx: Context) -> list[Finding]:
    s = ctx.plan.settings
    out = []
    if s.unknown_flags:
        flags = ", ".join(s.unknown_flags)
        out.append(Finding(ID, "info", f"flags kvplan does not model (kept as given): {flags}",
                           "check that they do not change GPU or host memory"))
    if s.unmodeled:
        what = ", ".join(s.unmodeled)
        out.append(Finding("unmodeled-memory", "warning", f"this launch uses {what}; kvplan does not size it, "
                           "so KV figures are an upper bound", "pass --weights-gib with the per-rank total if known"))
    return out
