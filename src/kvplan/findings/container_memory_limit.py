"""container-memory-limit (error): the launch's host ledger on one node exceeds the container's cgroup memory limit:
the kernel OOM-kills the container, and a Deployment or StatefulSet restarts it into the same kill (CrashLoopBackOff).

Signals (``kvplan.ledger.judge``): per node, the ledger's peak (steady or loading: the pinned host tiers — SGLang
HiCache pools, vLLM native offload region, LMCache, ``--cpu-offload-gb``, swap; all charged to the container's
cgroup, /dev/shm pages included — plus every rank's process, the tokenizer and detokenizer, communicators and
queues) is more than ``container_limit_bytes``. The message names the biggest terms.
Cause: host tiers sized for the node (or per rank, ×ranks) in a pod whose limit is the real budget; the engine's own
host check may not see the cgroup at all (``Engine.cgroup_note``: SGLang before 0.5.23 reads psutil's host figure).
Fix: the engine's resize of its largest tier (``settings.host_fix``) when it was sized for this limit, else the
pools that fit ``limit − the rest of the ledger``; or a larger ``resources.limits.memory`` / ``--memory`` / ``--mem``.

PER_RANK_FLOOR_BYTES is the floor of a rank's own process (``hostmem.GPU_RANK_FLOOR_BYTES``: torch + CUDA init,
pytorch/pytorch#113326); the ledger's rank row is that floor plus the engine's imports, with its range.
"""

from __future__ import annotations

import math

from kvplan.findings import Context
from kvplan.hostmem import GPU_RANK_FLOOR_BYTES
from kvplan.ledger import describe_peak, judge
from kvplan.result import Finding
from kvplan.units import GiB

ID = "container-memory-limit"
PER_RANK_FLOOR_BYTES = GPU_RANK_FLOOR_BYTES  # peak RSS of torch + CUDA init, pytorch/pytorch#113326 (see above)


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines import get_engine

    p, n = ctx.plan, ctx.plan.per_node
    limit = n.container_limit_bytes
    if limit is None:
        return []
    j = judge(p)
    if not j.over_limit:
        return []
    need = j.peak.bytes
    engine = get_engine(p.engine)
    tiers = "; ".join(engine.describe_host_tiers(p)) or "no host KV tier"
    msg = (f"per node: {tiers}: {describe_peak(j)}, over the container's memory limit of {limit / GiB:,.1f} GiB "
           f"({n.container_limit_source}): the kernel OOM-kills the container (and a controller restarts it into the "
           "same kill)")
    note = engine.cgroup_note(p)
    if note:
        msg += f"; {note}"
    raise_to = math.ceil(need * 1.1 / GiB)  # 10 % above the ledger's peak for what it does not see
    fix, flags = f"raise the memory limit to at least {raise_to}Gi", {}
    hf = p.settings.host_fix
    room = max(0, limit - (need - n.host_kv_bytes))
    sized_here = n.host_available_bytes is not None and n.host_available_bytes <= limit  # the fix fits this limit
    if n.host_kv_bytes and hf is not None and sized_here:
        fix, flags = f"{hf.text}; or {fix}", dict(hf.flags)
    elif n.host_kv_bytes:
        fix = (f"shrink the host tiers to at most {room / GiB:,.0f} GiB per node (limit − the rest of the ledger); "
               f"or {fix}")
    return [Finding(ID, "error", msg, fix, flags)]
