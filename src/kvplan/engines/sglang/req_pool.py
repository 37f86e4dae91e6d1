"""SGLang's request pool: max_running_requests per DP worker and the req_to_token table it allocates.

The estimate (``model_runner.py::ModelRunner.init_memory_pool``, all versions):
    estimated = min(max(int(tokens / context_len * 512), 2048), cap)      cap 5120 in 0.3.0, else 4096
Per version (``rules.max_running_rule``), read from the wheels:
  * "pool-0.3.0" (0.3.0): ReqToTokenPool(estimated, context_len + 8) - ``--max-running-requests`` does not size it
    (init_memory_pool gets ``--max-num-reqs``); tp_worker.py: max_running = min(user or tokens // 2, size - 1)
  * "pool-ctx8" (0.3.1, 0.3.1.post1): ReqToTokenPool(user or estimated, context_len + 8); max_running =
    min(user or tokens // 2, size)
  * "pool+1" (0.3.1.post2 .. 0.4.6.post5): ReqToTokenPool(size=(user or estimated) + 1, context_len + 4);
    max_running = min(user or tokens // 2, size)  - hence "max_running_requests=2049" in 0.4.x logs
  * "pool" (0.4.7 .. 0.5.9): size = user or estimated; max_running = min(user or tokens // 2, size)
  * "cap-estimate" (0.5.10-0.5.13, ``_resolve_max_num_reqs``) caps an explicit value at the estimate;
    "cap-half" (0.5.14+, ``KVCacheConfigurator.resolve_max_num_reqs``) caps it at tokens // 2.
An explicit value is divided by the attention-DP size (tp_worker.py, 0.4.x+).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.sglang.args import SGLangArgs
from kvplan.engines.sglang.rules import SGLangRules


@dataclass(frozen=True)
class ReqPool:
    max_running_requests: int  # per DP worker
    rows: int  # req_to_token rows
    cols: int  # req_to_token columns (context_len + extra)

    @property
    def bytes(self) -> int:
        return self.rows * self.cols * 4  # int32


def req_pool(tokens: int, ctx: int, args: SGLangArgs, rules: SGLangRules, draft_tokens: int = 0) -> ReqPool:
    """``draft_tokens``: speculative decoding widens every row by its draft tokens (0.5.9
    ``init_memory_pool``: ``extra_max_context_len = 4 + speculative_num_draft_tokens``)."""
    if tokens <= 0:
        return ReqPool(0, 0, 0)
    ctx += draft_tokens
    rule = rules.max_running_rule
    cap = 5120 if rule == "pool-0.3.0" else 4096
    estimated = min(max(int(tokens / max(ctx, 1) * 512), 2048), cap)
    user = max(1, args.max_running_requests // args.attn_dp_size) if args.max_running_requests else None
    if rule == "pool-0.3.0":
        return ReqPool(min(user or tokens // 2, estimated - 1), estimated, ctx + 8)
    if rule == "pool-ctx8":
        size = user or estimated
        return ReqPool(min(user or tokens // 2, size), size, ctx + 8)
    if rule == "pool+1":
        size = (user or estimated) + 1
        return ReqPool(min(user or tokens // 2, size), size, ctx + 4)
    if rule == "pool":
        if user:
            return ReqPool(user, user + 1, ctx + 4)
        return ReqPool(min(tokens // 2, estimated), estimated + 1, ctx + 4)
    if user:
        mrr = min(user, estimated) if rule == "cap-estimate" else min(user, tokens // 2)
    else:
        mrr = min(estimated, tokens // 2)
    return ReqPool(mrr, mrr + 1, ctx + 4)
