"""mla-replicated-kv: an MLA model under plain TP stores the same latent KV on every rank; with DP attention each
rank holds distinct requests (the what-if is a second Plan, not a second formula).

Signals: MLA, attention TP >= 2, a non-empty pool. Severity: info (capacity advice: nothing fails or is at
risk; kvplan.findings' scale).
Fix: --enable-dp-attention --dp <tp>, priced by re-planning the launch with it.
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Finding

ID = "mla-replicated-kv"


def check(ctx: FindingContext) -> list[Finding]:
    p = ctx.plan
    s = sglang_settings(p)
    tp = s.attn_tp_size or 1
    if not p.model.is_mla or tp < 2 or not p.per_rank.kv_tokens:
        return []
    r, rep = p.per_rank, p.per_replica
    msg = (f"MLA KV is not sharded by TP: each of the {tp} ranks of an attention group stores the same "
           f"{r.kv_tokens:,} tokens ({r.kv_bytes_per_token:,} B/token per rank), so the replica holds "
           f"{rep.kv_tokens:,} distinct tokens, not {tp}×")
    fix = "consider --enable-dp-attention (DP attention: each rank keeps its own requests)"
    flags: dict[str, str | None] = {}
    if ctx.replan is not None:
        tp_size = s.tp_size or tp
        try:
            alt = ctx.replan(enable_dp_attention=True, dp_size=tp_size)
        except Exception:  # noqa: BLE001 - a what-if must never break the check
            alt = None
        if alt is not None and alt.per_replica.kv_tokens:
            gain = alt.per_replica.kv_tokens / max(1, rep.kv_tokens)
            msg += (f"; with --enable-dp-attention --dp {tp_size} the replica would hold "
                    f"{alt.per_replica.kv_tokens:,} distinct tokens ({gain:.1f}× more; "
                    f"{alt.per_replica.requests_fit} requests of {rep.avg_tokens:,} tokens instead of "
                    f"{rep.requests_fit})")
            fix = f"--enable-dp-attention --dp {tp_size} ({gain:.1f}× the KV tokens per replica)"
    return [Finding(ID, "info", msg, fix, flags)]
