"""kv-pool-empty (error): what one worker has left for the KV cache holds no block; vLLM fails with "No available
memory for the cache blocks".

Signals: the plan holds 0 KV tokens. Fix: more GPUs (TP/PP), a larger GPU, or a smaller/quantized checkpoint.
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.vllm.settings import vllm_settings
from kvplan.result import Finding
from kvplan.units import GiB

ID = "kv-pool-empty"


def check(ctx: FindingContext) -> list[Finding]:
    r, s = ctx.plan.per_rank, vllm_settings(ctx.plan)
    if r.kv_tokens > 0:
        return []
    msg = (f"per rank: {s.kv_budget_bytes_per_rank / GiB:,.2f} GiB left for the KV cache ({s.kv_budget_source}); "
           f"weights take {r.weights_bytes / GiB:,.2f} GiB per rank; vLLM fails with 'No available memory for the "
           "cache blocks'")
    return [Finding(ID, "error", msg, "use more GPUs (--tensor-parallel-size / --pipeline-parallel-size), a larger "
                    "GPU, or a smaller/quantized checkpoint")]
