"""mla-replicated-kv: an MLA model under tensor parallelism stores the same latent KV on every TP rank
(MLAAttentionSpec); data-parallel ranks with expert parallelism each hold their own requests.

Signals: MLA, TP >= 2, a non-empty pool. Severity: info (capacity advice: nothing fails or is at
risk; kvplan.findings' scale).
Fix: --data-parallel-size <tp> --enable-expert-parallel instead of TP.
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.vllm.settings import vllm_settings
from kvplan.result import Finding

ID = "mla-replicated-kv"


def check(ctx: FindingContext) -> list[Finding]:
    p = ctx.plan
    tp = vllm_settings(p).attn_tp_size or 1
    if not p.model.is_mla or tp < 2 or not p.per_rank.kv_tokens:
        return []
    r, rep = p.per_rank, p.per_replica
    msg = (f"MLA KV is not sharded by TP: each of the {tp} ranks of an attention group stores the same "
           f"{r.kv_tokens:,} tokens ({r.kv_bytes_per_token:,} B/token per rank), so the replica holds "
           f"{rep.kv_tokens:,} distinct tokens, not {tp}×")
    fix = (f"vLLM: --data-parallel-size {tp} --enable-expert-parallel instead of TP {tp} (each DP rank holds "
           "its own requests; about the same KV per rank, so the replica holds up to that many times more)")
    return [Finding(ID, "info", msg, fix, {})]
