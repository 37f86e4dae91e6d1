"""ipc-missing: several ranks on one node share data through /dev/shm (NCCL's shared-memory transport, PyTorch's
shared tensors, the engine's message queues), but the container's /dev/shm is the runtime's small default.

Signals: 2+ ranks on the node and a known /dev/shm (``per_node.shm_bytes``) under 1 GiB: no ``--ipc=host`` /
``ipc: host`` / ``hostIPC``, no ``--shm-size`` / ``shm_size``, no ``emptyDir {medium: Memory}`` at /dev/shm.
vLLM's docs: "You can either use the ipc=host flag or --shm-size flag to allow the container to access the host's
shared memory. vLLM uses PyTorch, which uses shared memory to share data between processes under the hood,
particularly for tensor parallel inference." (https://docs.vllm.ai/en/v0.5.0/serving/deploying_with_docker.html);
SGLang's own Compose file runs with ``ipc: host``
(https://github.com/sgl-project/sglang/blob/v0.5.9/docker/compose.yaml).
Severity: error when /dev/shm is smaller than the engine's own queues need (``Engine.ipc_shm_bytes``: vLLM's
message-queue segments, a SIGBUS once they fill), else a warning (NCCL falls back to /dev/shm where GPUs lack P2P).
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding
from kvplan.units import GiB, MiB

ID = "ipc-missing"
SHM_MIN_BYTES = 1 * GiB


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines import get_engine

    p, n = ctx.plan, ctx.plan.per_node
    if n.ranks < 2 or n.shm_bytes is None or n.shm_bytes >= SHM_MIN_BYTES:
        return []
    where = f" ({n.shm_source})" if n.shm_source else ""
    need = get_engine(p.engine).ipc_shm_bytes(p) or 0
    msg = f"per node: {n.ranks} ranks share one /dev/shm of {n.shm_bytes / MiB:,.0f} MiB{where}"
    fix = "docker: --ipc=host or --shm-size 16g; Compose: ipc: host or shm_size; Kubernetes: an emptyDir with " \
          "medium: Memory mounted at /dev/shm"
    if need > n.shm_bytes:
        return [Finding(ID, "error", msg + f"; the engine's inter-process queues alone map {need / MiB:,.0f} MiB "
                        "there (Bus error once they fill)", fix)]
    return [Finding(ID, "warning", msg + "; NCCL and PyTorch's shared tensors need more where GPUs lack P2P", fix)]
