"""toy-pool-below-context (warning): the pool holds less than one request of the model's context length.

Signals: KV tokens per rank < context length. Fix: a larger --kv-gib (what the re-planned launch holds is shown)."""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.result import Finding

ID = "toy-pool-below-context"


def check(ctx: FindingContext) -> list[Finding]:
    r, ctx_len = ctx.plan.per_rank, ctx.plan.settings.context_len
    if r.kv_tokens >= ctx_len:
        return []
    gib = 2 * getattr(ctx.plan.settings, "kv_gib", 1.0)
    alt = ctx.replan(kv_gib=gib) if ctx.replan is not None else None
    more = f" (--kv-gib {gib:g} holds {alt.per_rank.kv_tokens:,})" if alt is not None else ""
    return [Finding(ID, "warning", f"per rank: {r.kv_tokens:,} KV tokens < context length {ctx_len:,}",
                    f"--kv-gib {gib:g}{more}", {"--kv-gib": f"{gib:g}"})]
