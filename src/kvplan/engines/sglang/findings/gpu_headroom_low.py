"""gpu-headroom-low: what is left outside the static pool cannot hold the CUDA graphs, the req_to_token
table and the prefill activations (error when the graphs alone do not fit, warning below the docs' advice)."""

from __future__ import annotations

import math

from kvplan.engines.base import FindingContext as Context
from kvplan.engines.sglang.calibration import RECOMMENDED_AVAIL
from kvplan.result import Finding
from kvplan.units import GiB

ID = "gpu-headroom-low"


def check(ctx: Context) -> list[Finding]:
    r = ctx.plan.per_rank
    if r.kv_tokens == 0 or r.mem_fraction_static is None:
        return []
    after_pools, after_graphs = r.headroom_after_pools_bytes, r.headroom_after_graphs_bytes
    want = int(RECOMMENDED_AVAIL.value_gib * GiB)
    if after_graphs >= want:
        return []
    error = after_pools < r.cuda_graph_bytes
    msg = (f"per rank: mem_fraction_static={r.mem_fraction_static} leaves {r.headroom_bytes / GiB:.2f} GiB outside "
           f"the static pool; req_to_token takes {r.req_to_token_bytes / GiB:.2f} GiB, CUDA graphs about "
           f"{r.cuda_graph_bytes / GiB:.2f} GiB (estimate), leaving {after_graphs / GiB:.2f} GiB for prefill "
           f"activations (SGLang docs advise 5-8 GB of available_gpu_mem)")
    if error:
        msg += "; the CUDA graphs will not fit: expect an OOM at capture"
    # lower the fraction until the recommended headroom is back (step 0.01, like users tune it)
    need = want - after_graphs
    new = math.floor((r.mem_fraction_static - need / r.baseline_free_bytes) * 100) / 100
    flags: dict[str, str | None] = {}
    if new > 0.5:
        fix = f"--mem-fraction-static {new:.2f} (keeps about {RECOMMENDED_AVAIL.value_gib:g} GiB per rank after graphs)"
        flags["--mem-fraction-static"] = f"{new:.2f}"
    else:
        fix = "reduce --cuda-graph-max-bs or --max-running-requests, or use more GPUs"
    return [Finding(ID, "error" if error else "warning", msg, fix, flags)]
