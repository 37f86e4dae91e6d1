"""context-exceeds-pool (warning): one request of the full context length does not fit the GPU KV pool; SGLang caps
max_req_len at the pool size (``max_req_len = min(context_len - 1, tokens - 1)``), so longer requests are rejected.

Signals: 0 < KV tokens per rank < context length. Fix: a shorter --context-length, or more KV memory.
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.result import Finding

ID = "context-exceeds-pool"


def check(ctx: FindingContext) -> list[Finding]:
    r, ctx_len = ctx.plan.per_rank, ctx.plan.settings.context_len
    if r.kv_tokens == 0 or r.kv_tokens >= ctx_len:
        return []
    msg = (f"per rank (= per DP group): the GPU pool holds {r.kv_tokens:,} tokens, less than one request of the "
           f"context length {ctx_len:,}; requests longer than {r.kv_tokens - 1:,} tokens are rejected")
    return [Finding(ID, "warning", msg, f"--context-length {r.kv_tokens // 1024 * 1024} or more KV memory",
                    {})]
