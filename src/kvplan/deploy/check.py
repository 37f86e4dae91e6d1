"""Plan every engine container of a deployment with its own limits.

Per container: the GPU from ``--gpu`` or the manifest's node selector / ``--gres`` type; the nodes one engine spans
from the workload (LeaderWorkerSet size, ``#SBATCH --nodes``; SGLang's ``--nnodes`` is read by the engine itself);
the engine version from the image tag when the image is that engine's and ``--engine-version`` is not given; and
the container's limits as typed PlanOptions: ``container_mem_gib`` (the cgroup limit that OOM-kills; also the host
budget when ``--host-mem-gib`` does not give the node's memory), ``shm_gib`` (its /dev/shm), ``gpus_requested``
(GPUs given per pod / node). Then the same ``check`` as a bare command, whose findings include the deployment rules
(``container-memory-limit``, ``shm-too-small``, ``gpu-count-mismatch``, ``ipc-missing``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.deploy.model import Container
from kvplan.errors import KvplanError
from kvplan.result import CheckResult
from kvplan.units import GiB


@dataclass(frozen=True)
class DeployItem:
    """One engine container and its check (or the one-line reason it could not be planned)."""

    container: Container
    result: CheckResult | None
    error: str | None = None
    assumptions: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        return self.result.verdict if self.result is not None else "fail"

    def to_dict(self) -> dict[str, Any]:
        c = self.container
        return {"name": c.label, "source": c.source, "workload": c.workload, "container": c.name, "image": c.image,
                "command": " ".join(c.argv),
                "limits": {"memory_limit_bytes": c.memory_limit_bytes, "memory_limit_source": c.memory_limit_source,
                           "memory_request_bytes": c.memory_request_bytes,
                           "memory_request_source": c.memory_request_source,
                           "shm_bytes": c.shm_bytes, "shm_source": c.shm_source, "ipc_host": c.ipc_host,
                           "gpus_per_node": c.gpus, "gpu_product": c.gpu_product, "nodes": c.nodes,
                           "replicas": c.replicas, "node_host_bytes": c.node_host_bytes,
                           "node_host_source": c.node_host_source},
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
        """2 when a container could not be planned (bad input), 1 on an error finding, else 0."""
        if any(i.error for i in self.items):
            return 2
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
    """PlanOptions fields for one container: the command line's own options win, the manifest fills the rest."""
    from kvplan.deploy.images import is_image_of
    from kvplan.engines import detect_engine, split_command

    opts = {k: v for k, v in base.items() if v is not None}
    notes: list[str] = []
    if not opts.get("gpu") and not opts.get("gpu_mem_mib") and c.gpu_product:
        name = _gpu_name(c.gpu_product)
        if name:
            opts["gpu"] = name
            notes.append(f"GPU {name} from the manifest's {c.gpu_product!r}")
        else:
            notes.append(f"GPU label {c.gpu_product!r} is not in the catalog: pass --gpu")
    if c.nodes > 1 and opts.get("nodes", 1) == 1:
        opts["nodes"] = c.nodes
    engine = detect_engine(split_command(list(c.argv)))
    if c.engine_version and not opts.get("engine_version") and is_image_of(c.image, engine.name):
        opts["engine_version"] = c.engine_version
        notes.append(f"engine version {c.engine_version} from the image tag {c.image}")
    if c.node_host_bytes and opts.get("host_mem_gib") is not None:  # the node's memory, less its cache servers
        opts["host_mem_gib"] = max(0.0, opts["host_mem_gib"] - c.node_host_bytes / GiB)
        notes.append(f"--host-mem-gib less {c.node_host_bytes / GiB:,.1f} GiB that {c.node_host_source} holds on "
                     f"the node: {opts['host_mem_gib']:,.1f} GiB for this engine")
    if c.memory_limit_bytes is not None and opts.get("container_mem_gib") is None:
        opts["container_mem_gib"] = c.memory_limit_bytes / GiB
        opts["container_mem_source"] = c.memory_limit_source
    if c.memory_request_bytes is not None and opts.get("container_mem_request_gib") is None:
        opts["container_mem_request_gib"] = c.memory_request_bytes / GiB
        opts["container_mem_request_source"] = c.memory_request_source
    if opts.get("shm_gib") is None:
        if c.shm_bytes is not None:
            opts["shm_gib"] = c.shm_bytes / GiB
        opts["shm_source"] = c.shm_source
    if c.gpus is not None and opts.get("gpus_requested") is None:
        opts["gpus_requested"] = c.gpus
    return opts, notes


def check_containers(containers: list[Container], base: dict[str, Any]) -> DeployResult:
    """Each container's check; a container that cannot be planned keeps its one-line reason."""
    from kvplan.api import check

    items = []
    for c in containers:
        notes: list[str] = []
        try:
            opts, notes = options_for(c, base)
            items.append(DeployItem(c, check(list(c.argv), **opts), assumptions=tuple(notes)))
        except KvplanError as e:
            items.append(DeployItem(c, None, error=str(e), assumptions=tuple(notes)))
    return DeployResult(tuple(items))
