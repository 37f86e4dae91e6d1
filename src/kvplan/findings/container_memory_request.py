"""container-memory-request (warning): the launch's host ledger on one node exceeds the pod's memory request while no
smaller limit binds it. The scheduler placed the pod by its request, so the node was not checked for the rest; under
node memory pressure the kubelet evicts the pods that use more than they requested first
(https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/: "whether the pod's resource usage
exceeds requests"); pinned pages cannot be reclaimed.

Signals: per node, the ledger's peak (``kvplan.ledger.judge``: pinned tiers, every rank's process, the tokenizer and
detokenizer, communicators, queues) is more than ``container_request_bytes``, and the container's memory limit (if
any) is not already below it (then container-memory-limit says more: an OOM-kill).
Fix: a memory request of at least the peak (vLLM production-stack: ``requestMemory``), or the host tiers shrunk to
fit the request.
"""

from __future__ import annotations

import math

from kvplan.findings import Context
from kvplan.ledger import describe_peak, judge
from kvplan.result import Finding
from kvplan.units import GiB

ID = "container-memory-request"


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines import get_engine

    p, n = ctx.plan, ctx.plan.per_node
    req = n.container_request_bytes
    if req is None:
        return []
    j = judge(p)
    need = j.peak.bytes
    if need <= req or j.over_limit:
        return []
    tiers = "; ".join(get_engine(p.engine).describe_host_tiers(p)) or "no host KV tier"
    msg = (f"per node: {tiers}: {describe_peak(j)}, over the pod's memory request of {req / GiB:,.1f} GiB "
           f"({n.container_request_source}): the scheduler placed the pod by its request, and under node memory "
           "pressure the kubelet evicts pods above their request first (pinned pages cannot be reclaimed)")
    raise_to = math.ceil(need * 1.1 / GiB)
    room = max(0, req - (need - n.host_kv_bytes))
    fix = (f"request at least {raise_to}Gi of memory (production-stack: requestMemory: \"{raise_to}Gi\"), or shrink "
           f"the host tiers to at most {room / GiB:,.0f} GiB per node")
    return [Finding(ID, "warning", msg, fix, {})]
