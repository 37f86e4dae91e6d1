"""container-memory-limit (error): the engine's pinned host memory on one node, plus what its rank processes hold
at the least, exceeds the container's cgroup memory limit: the kernel OOM-kills the container, and a Deployment or
StatefulSet restarts it into the same kill (CrashLoopBackOff).

Signals: per node, ``host_kv_bytes`` (the pinned host tiers: SGLang HiCache pools, vLLM native offload region,
LMCache, ``--cpu-offload-gb``, swap; all charged to the container's cgroup, /dev/shm pages included) plus
``ranks × PER_RANK_FLOOR_BYTES`` is more than ``container_limit_bytes``.
Cause: host tiers sized for the node (or per rank, ×ranks) in a pod whose limit is the real budget; the engine's own
host check may not see the cgroup at all (``Engine.cgroup_note``: SGLang before 0.5.23 reads psutil's host figure).
Fix: the engine's resize of its largest tier (``settings.host_fix``) when it was sized for this limit, else the
pools that fit ``limit − floor``; or a larger ``resources.limits.memory`` / ``--memory`` / ``--mem``.

PER_RANK_FLOOR_BYTES is calibration, a floor and not an estimate: the peak RSS of a process that imports torch,
initialises CUDA and makes one tensor, 2,056,600 kB (``/usr/bin/time -v``, PyTorch 2.2 / CUDA 11.8) in
https://github.com/pytorch/pytorch/issues/113326 . A rank of SGLang or vLLM also loads NCCL, Triton, the model code
and the tokenizer, and stages weights through host memory, so its real RSS is higher; the checkpoint's mmap'd page
cache is reclaimable and not counted.
"""

from __future__ import annotations

import math

from kvplan.findings import Context
from kvplan.result import Finding
from kvplan.units import GiB

ID = "container-memory-limit"
PER_RANK_FLOOR_BYTES = 2_056_600 * 1024  # peak RSS of torch + CUDA init, pytorch/pytorch#113326 (see above)


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines import get_engine

    p, n = ctx.plan, ctx.plan.per_node
    limit = n.container_limit_bytes
    if limit is None:
        return []
    floor = n.ranks * PER_RANK_FLOOR_BYTES
    need = n.host_kv_bytes + floor
    if need <= limit:
        return []
    engine = get_engine(p.engine)
    tiers = "; ".join(engine.describe_host_tiers(p)) or "no host KV tier"
    msg = (f"per node: {tiers}: {n.host_kv_bytes / GiB:,.1f} GiB pinned + {n.ranks} rank process(es) × at least "
           f"{PER_RANK_FLOOR_BYTES / GiB:.2f} GiB = {need / GiB:,.1f} GiB, over the container's memory limit of "
           f"{limit / GiB:,.1f} GiB ({n.container_limit_source}): the kernel OOM-kills the container (and a "
           "controller restarts it into the same kill)")
    note = engine.cgroup_note(p)
    if note:
        msg += f"; {note}"
    raise_to = math.ceil(need * 1.1 / GiB)  # 10 % above the floor for what the ranks hold beyond it
    fix, flags = f"raise the memory limit to at least {raise_to}Gi", {}
    hf = p.settings.host_fix
    room = max(0, limit - floor)
    sized_here = n.host_available_bytes is not None and n.host_available_bytes <= limit  # the fix fits this limit
    if n.host_kv_bytes and hf is not None and sized_here:
        fix, flags = f"{hf.text}; or {fix}", dict(hf.flags)
    elif n.host_kv_bytes:
        fix = f"shrink the host tiers to at most {room / GiB:,.0f} GiB per node (limit − rank floor); or {fix}"
    return [Finding(ID, "error", msg, fix, flags)]
