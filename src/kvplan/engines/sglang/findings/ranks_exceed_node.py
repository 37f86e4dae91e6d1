"""ranks-exceed-node: SGLang starts ``tp × pp // nnodes`` ranks on every node, one GPU each, so a TP/PP size larger
than a node's GPUs needs ``--nnodes`` (with ``--node-rank`` and ``--dist-init-addr``) on each node.

Signals: ranks per node as SGLang splits them (``_launch_scheduler_processes``: ``pp_size // nnodes`` stages x
``tp_size // (nnodes // pp_size)`` TP ranks on each host, GPU ``base_gpu_id + ...`` counted from 0 on every host,
https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/entrypoints/engine.py) against the plan's GPUs
per node (``--gpus-per-node``, or what kvplan assumed: the launch's ranks per node, at most 8).
Severity: error (rank ``k`` >= the node's GPUs gets "CUDA error: invalid device ordinal", or the launch waits for
ranks that never start).
Fix: ``--nnodes N --node-rank i --dist-init-addr HOST:PORT`` on each of N nodes, or give ``--gpus-per-node`` if the
node really has that many GPUs.
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Finding

ID = "ranks-exceed-node"


def check(ctx: FindingContext) -> list[Finding]:
    p = ctx.plan
    s = sglang_settings(p)
    nnodes = max(1, s.nnodes)
    per_host = s.world_size // nnodes
    gpus = p.cluster.gpus_per_node
    if per_host <= gpus:
        return []
    need = -(-s.world_size // gpus)
    msg = (f"--tp {s.tp_size}" + (f" --pp {s.pp_size}" if s.pp_size > 1 else "") + f" with --nnodes {nnodes}"
           + (" (the default)" if nnodes == 1 else "") + f": SGLang starts {per_host} ranks on each node, one GPU "
           f"each, but a node has {gpus} GPUs (--gpus-per-node{'' if gpus != 8 else ', or kvplan assumes 8'}); ranks "
           f"{gpus}-{per_host - 1} fail with 'invalid device ordinal' or the launch waits for them")
    fix = (f"run it on {need} nodes: add --nnodes {need} --node-rank <i> --dist-init-addr <node0>:<port> on each, or "
           f"pass --gpus-per-node {per_host} if a node has {per_host} GPUs")
    return [Finding(ID, "error", msg, fix)]
