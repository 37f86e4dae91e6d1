"""Plan every engine container of a deployment with its own limits as the budget.

Per container: the GPU from ``--gpu`` or the manifest's node selector / ``--gres`` type, GPUs per node from its
resources, nodes from the workload (LeaderWorkerSet size, ``--nodes``), the engine version from the image tag
unless ``--engine-version`` is given, the host budget from the container's memory limit (the cgroup that
OOM-kills) or ``--host-mem-gib`` (the node), ``/dev/shm`` from the container's own size. Then the same
``check`` as a bare command, whose findings include the deployment rules (``container-memory-limit``,
``shm-too-small``, ``gpu-count-mismatch``, ``ipc-missing``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.deploy.model import Container
from kvplan.errors import KvplanError
from kvplan.units import GiB


@dataclass(frozen=True)
class DeployItem:
    container: Container
    result: Any | None  # CheckResult, or None when the container could not be planned
    error: str | None = None
    assumptions: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        return self.result.verdict if self.result is not None else "fail"

    def to_dict(self) -> dict[str, Any]:
        c = self.container
        return {"source": c.source, "workload": c.workload, "container": c.name, "image": c.image,
                "command": " ".join(c.argv),
                "limits": {"memory_limit_bytes": c.memory_limit_bytes, "memory_limit_source": c.memory_limit_source,
                           "shm_bytes": c.shm_bytes, "shm_source": c.shm_source, "ipc_host": c.ipc_host,
                           "gpus_per_node": c.gpus, "gpu_product": c.gpu_product, "nodes": c.nodes,
                           "replicas": c.replicas},
                "notes": list(c.notes) + list(self.assumptions), "error": self.error, "verdict": self.verdict,
                "check": self.result.to_dict() if self.result is not None else None}


@dataclass(frozen=True)
class DeployResult:
    items: tuple[DeployItem, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> str:
        v = {i.verdict for i in self.items}
        return "fail" if "fail" in v else "warn" if "warn" in v else "ok"

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "fail" else 0

    def to_dict(self) -> dict[str, Any]:
        from kvplan.result import SCHEMA_VERSION

        return {"schema_version": SCHEMA_VERSION, "deployments": [i.to_dict() for i in self.items],
                "verdict": self.verdict}


def _gpu_name(product: str) -> str | None:
    """A node-label GPU name (``NVIDIA-H100-80GB-HBM3``, ``nvidia-h100-80gb``, ``h100``) in the catalog."""
    from kvplan.hardware.gpus import lookup_gpu

    for cand in (product, product.replace("-", " "), product.replace("_", " ")):
        try:
            return lookup_gpu(cand).name
        except KvplanError:
            continue
    return None


def options_for(c: Container, base: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """PlanOptions fields for one container: the CLI's own options win, the manifest fills the rest."""
    opts = {k: v for k, v in base.items() if v is not None}
    notes: list[str] = []
    if not opts.get("gpu") and not opts.get("gpu_mem_mib") and c.gpu_product:
        name = _gpu_name(c.gpu_product)
        if name:
            opts["gpu"] = name
            notes.append(f"GPU {name} from the manifest's {c.gpu_product!r}")
        else:
            notes.append(f"GPU label {c.gpu_product!r} is not in the catalog: pass --gpu")
    if c.gpus and not opts.get("gpus_per_node"):
        opts["gpus_per_node"] = c.gpus
    if c.nodes > 1 and opts.get("nodes", 1) == 1:
        opts["nodes"] = c.nodes
    if c.engine_version and not opts.get("engine_version"):
        opts["engine_version"] = c.engine_version
        notes.append(f"engine version {c.engine_version} from the image tag {c.image}")
    if c.memory_limit_bytes:
        node = opts.get("host_mem_gib")
        limit_gib = c.memory_limit_bytes / GiB
        if node is None or limit_gib <= node:
            opts["host_mem_gib"] = limit_gib
            opts["host_mem_source"] = f"container memory limit ({c.memory_limit_source})"
            opts["host_is_container_limit"] = True
    opts["shm_bytes"] = c.shm_bytes
    opts["shm_source"] = c.shm_source
    return opts, notes


def check_containers(containers: list[Container], base: dict[str, Any]) -> DeployResult:
    from kvplan.api import check

    items = []
    for c in containers:
        opts, notes = options_for(c, base)
        try:
            items.append(DeployItem(c, check(list(c.argv), **opts), assumptions=tuple(notes)))
        except KvplanError as e:
            items.append(DeployItem(c, None, error=str(e), assumptions=tuple(notes)))
    return DeployResult(tuple(items))
