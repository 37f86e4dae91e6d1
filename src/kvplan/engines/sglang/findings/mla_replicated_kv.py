"""mla-replicated-kv: an MLA model under plain TP stores the same latent KV on every rank; with DP attention each
rank holds distinct requests (the what-if is a second Plan, not a second formula).

Signals: MLA, attention TP >= 2, a non-empty pool. Severity: info (capacity advice: nothing fails or is at
risk; kvplan.findings' scale).
Fix: --enable-dp-attention --dp <tp>, priced by re-planning the launch with it at the same fraction (what ``check``
of that launch says); offered only when it holds more distinct tokens. DP attention replicates the attention
weights on every rank, so at the same fraction it can hold fewer tokens, or none (kv-pool-empty): then the finding
says so, and that it needs a higher fraction (``kvplan diagnose`` / ``tune`` price it at its largest check-safe one).
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
        what = f"with --enable-dp-attention --dp {tp_size} at this fraction"
        if alt is not None and alt.per_replica.kv_tokens > rep.kv_tokens:
            gain = alt.per_replica.kv_tokens / max(1, rep.kv_tokens)
            msg += (f"; {what} the replica would hold {alt.per_replica.kv_tokens:,} distinct tokens ({gain:.1f}× "
                    f"more; {alt.per_replica.requests_fit} requests of {rep.avg_tokens:,} tokens instead of "
                    f"{rep.requests_fit})")
            fix = f"--enable-dp-attention --dp {tp_size} ({gain:.1f}× the KV tokens per replica)"
        elif alt is not None:
            w = alt.per_rank.weights_bytes / 2**30
            held = ("would have no KV room" if not alt.per_replica.kv_tokens else
                    f"would hold only {alt.per_replica.kv_tokens:,} distinct tokens")
            msg += f"; {what} the replica {held} (weights {w:.1f} GiB per rank with the attention block replicated)"
            fix = ("DP attention needs a higher --mem-fraction-static here (the attention weights are replicated on "
                   "every rank): kvplan diagnose or kvplan tune price it at its largest check-safe fraction")
    return [Finding(ID, "info", msg, fix, flags)]
