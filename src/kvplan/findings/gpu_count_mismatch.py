"""gpu-count-mismatch: the GPUs a container (pod, Slurm node) is given differ from the ranks the launch puts on it.

Signals: ``per_node.gpus_requested`` (a manifest's ``nvidia.com/gpu`` / ``amd.com/gpu`` limit, ``--gpus``, Compose
device reservations, ``--gres=gpu:N``) against the launch's GPU ranks per node: ranks of a replica (TP × PP) ×
replicas (plain DP) over the nodes the launch spans (``--nnodes``, LeaderWorkerSet size, ``#SBATCH --nodes``).
Severity: error when fewer GPUs are given than ranks need (the engine cannot place its ranks: CUDA "invalid device
ordinal" or a hang waiting for peers), warning when more are given (they stay idle while counted against quota).
Fix: make the request match, or change TP / PP / DP.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding

ID = "gpu-count-mismatch"


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines import get_engine

    p, n = ctx.plan, ctx.plan.per_node
    given = n.gpus_requested
    if given is None or get_engine(p.engine).kv_cache_on_host(p) is not None:  # a CPU launch uses no GPU
        return []
    r = p.per_replica
    total = r.ranks * r.replicas
    nodes = max(1, p.cluster.nodes)
    need = -(-total // nodes)
    if given == need:
        return []
    how = (f"per node: the launch runs {total} GPU rank(s) ({r.ranks} per replica × {r.replicas} replica(s)) over "
           f"{nodes} node(s), {need} per node, but the container is given {given} GPU(s)")
    if given < need:
        return [Finding(ID, "error", how + ": the engine cannot place its ranks (invalid device ordinal, or a hang "
                        "waiting for ranks that never start)",
                        f"request {need} GPU(s) per pod/node, or lower TP/PP/DP to fit {given}")]
    return [Finding(ID, "warning", how + f": {given - need} stay idle",
                    f"request {need} GPU(s) per pod/node, or raise TP/DP to use them")]
