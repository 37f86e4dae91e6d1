"""kv-pool-empty (error): the weights (and everything else outside the KV cache) leave no room for KV."""

from __future__ import annotations

import math

from kvplan.engines.base import FindingContext as Context
from kvplan.result import Finding
from kvplan.units import GiB

ID = "kv-pool-empty"


def check(ctx: Context) -> list[Finding]:
    r, s = ctx.plan.per_rank, ctx.plan.settings
    if r.kv_tokens > 0:
        return []
    if ctx.plan.engine == "vllm":
        budget = s.get("kv_budget_bytes_per_rank") or 0
        msg = (f"per rank: {budget / GiB:,.2f} GiB left for the KV cache ({s.get('kv_budget_source')}); weights take "
               f"{r.weights_bytes / GiB:,.2f} GiB per rank; vLLM fails with 'No available memory for the cache blocks'")
        return [Finding(ID, "error", msg, "use more GPUs (--tensor-parallel-size / --pipeline-parallel-size), a larger "
                        "GPU, or a smaller/quantized checkpoint")]
    p, w = r.baseline_free_bytes, r.weights_bytes
    mfs = r.mem_fraction_static
    # sglang raises "Raise --mem-fraction-static above <1 - F/P rounded up>" (F = P - weights)
    floor = math.ceil(w / p * 100) / 100 if p else 1.0
    msg = (f"per rank: weights {w / GiB:.2f} GiB vs {p / GiB:.2f} GiB free before loading; at "
           f"mem_fraction_static={mfs} the static pool ({(mfs or 0) * p / GiB:.2f} GiB) holds no KV tokens")
    flags: dict[str, str | None] = {}
    if floor + 0.02 <= 0.95:
        new = round(floor + 0.02, 2)
        fix = f"raise --mem-fraction-static to at least {new} (weights alone take {floor:.2f} of P)"
        flags["--mem-fraction-static"] = f"{new}"
    else:
        fix = "the weights do not fit one GPU with room for KV: use more GPUs (--tp) or a smaller/quantized model"
    return [Finding(ID, "error", msg, fix, flags)]
