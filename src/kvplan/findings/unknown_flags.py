"""unknown-flags (info): flags the engine accepts but kvplan does not model (flags the engine rejects are
flag-unknown / flag-removed errors); unmodeled-memory (warning): features whose memory it does not size
(speculative decoding, LoRA, ...), so the KV figures are an upper bound.

Signals: the engine's parser kept flags it has no entry for (and the version's flag table accepts them), or flagged
a feature as unmodelled. Fix: check that they do not change GPU or host memory; ``--weights-gib`` with the per-rank
total if known.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding

ID = "unknown-flags"


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines.flagtable import problems_for

    s = ctx.plan.settings
    out = []
    rejected = {p.flag for p in problems_for(ctx.plan.engine, ctx.plan.engine_version, ctx.plan.command)}
    kept = [f for f in s.unknown_flags if f not in rejected]  # the engine accepts these
    if kept:
        flags = ", ".join(kept)
        out.append(Finding(ID, "info", f"flags kvplan does not model (kept as given): {flags}",
                           "check that they do not change GPU or host memory"))
    if s.unmodeled:
        what = ", ".join(s.unmodeled)
        out.append(Finding("unmodeled-memory", "warning", f"this launch uses {what}; kvplan does not size it, "
                           "so KV figures are an upper bound", "pass --weights-gib with the per-rank total if known"))
    return out
