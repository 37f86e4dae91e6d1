"""kv-pool-empty (error): the weights leave no room for KV in the static pool.

Signals: the plan holds 0 KV tokens per rank. Cause: weights ≥ mem_fraction_static × P (P: free GPU memory before
weights); SGLang raises "Raise --mem-fraction-static above <1 - F/P rounded up>" (F = P - weights).
Fix: a fraction 0.02 above the weights' share of P, or more GPUs / a smaller checkpoint.
"""

from __future__ import annotations

import math

from kvplan.engines.base import FindingContext
from kvplan.result import Finding
from kvplan.units import GiB

ID = "kv-pool-empty"


def check(ctx: FindingContext) -> list[Finding]:
    r = ctx.plan.per_rank
    pool = r.static
    if r.kv_tokens > 0 or pool is None:
        return []
    p, w, mfs = pool.baseline_free_bytes, r.weights_bytes, pool.mem_fraction_static
    floor = math.ceil(w / p * 100) / 100 if p else 1.0
    msg = (f"per rank: weights {w / GiB:.2f} GiB vs {p / GiB:.2f} GiB free before loading; at "
           f"mem_fraction_static={mfs} the static pool ({mfs * p / GiB:.2f} GiB) holds no KV tokens")
    flags: dict[str, str | None] = {}
    if floor + 0.02 <= 0.95:
        new = round(floor + 0.02, 2)
        fix = f"raise --mem-fraction-static to at least {new} (weights alone take {floor:.2f} of P)"
        flags["--mem-fraction-static"] = f"{new}"
    else:
        fix = "the weights do not fit one GPU with room for KV: use more GPUs (--tp) or a smaller/quantized model"
    return [Finding(ID, "error", msg, fix, flags)]
