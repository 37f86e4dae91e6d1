"""gpu-headroom-low: what is left outside the static pool cannot hold the CUDA graphs, the req_to_token table and the
prefill activations.

Signals: after the pools and the CUDA-graph estimate less than the recommended 4 GiB per rank remains (calibration:
RECOMMENDED_AVAIL). Severity: error when the graphs alone do not fit (OOM at capture), else warning.
Fix: the fraction lowered in 0.01 steps until the recommended headroom is back.
"""

from __future__ import annotations

import math

from kvplan.engines.base import FindingContext
from kvplan.engines.sglang.calibration import RECOMMENDED_AVAIL
from kvplan.result import Finding
from kvplan.units import GiB

ID = "gpu-headroom-low"


def check(ctx: FindingContext) -> list[Finding]:
    r = ctx.plan.per_rank
    pool = r.static
    if r.kv_tokens == 0 or pool is None:
        return []
    after_pools, after_graphs = pool.headroom_after_pools_bytes, pool.headroom_after_graphs_bytes
    want = int(RECOMMENDED_AVAIL.value_gib * GiB)
    if after_graphs >= want:
        return []
    error = after_pools < pool.cuda_graph_bytes
    msg = (f"per rank: mem_fraction_static={pool.mem_fraction_static} leaves {pool.headroom_bytes / GiB:.2f} GiB "
           f"outside the static pool; req_to_token takes {pool.req_to_token_bytes / GiB:.2f} GiB, CUDA graphs about "
           f"{pool.cuda_graph_bytes / GiB:.2f} GiB (estimate), leaving {after_graphs / GiB:.2f} GiB for prefill "
           f"activations (SGLang docs advise 5-8 GB of available_gpu_mem)")
    if error:
        msg += "; the CUDA graphs will not fit: expect an OOM at capture"
    # lower the fraction until the recommended headroom is back (step 0.01, like users tune it)
    need = want - after_graphs
    new = math.floor((pool.mem_fraction_static - need / pool.baseline_free_bytes) * 100) / 100
    flags: dict[str, str | None] = {}
    if new > 0.5:
        fix = f"--mem-fraction-static {new:.2f} (keeps about {RECOMMENDED_AVAIL.value_gib:g} GiB per rank after graphs)"
        flags["--mem-fraction-static"] = f"{new:.2f}"
    else:
        fix = "reduce --cuda-graph-max-bs or --max-running-requests, or use more GPUs"
    return [Finding(ID, "error" if error else "warning", msg, fix, flags)]
