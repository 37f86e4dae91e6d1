"""Cluster: the hardware a plan is made for, from options first and local detection second."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError
from kvplan.units import GiB

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.options import PlanOptions


@dataclass(frozen=True)
class Cluster:
    gpu_name: str
    gpu_mem_mib: int  # nvidia-smi memory.total of one GPU
    gpus_per_node: int
    nodes: int
    host_mem_bytes: int  # host memory the engine can use on one node (MemAvailable at launch)
    host_mem_source: str  # "--host-mem-gib" or "detected on this machine"
    shm_bytes: int | None = None
    gpu_source: str = "--gpu"
    shm_source: str | None = None  # "--shm-size 16g", "docker's default 64 MB", "detected on this machine"
    container_limit_bytes: int | None = None  # cgroup memory limit of the engine's container on one node
    container_limit_source: str | None = None  # "resources.limits.memory: 400Gi"
    gpus_requested: int | None = None  # GPUs the container / job is given on one node

    def node_limits(self) -> dict[str, Any]:
        """The NodePlan fields a container's limits fill (shm, cgroup limit, GPUs given)."""
        return {"shm_bytes": self.shm_bytes, "shm_source": self.shm_source,
                "container_limit_bytes": self.container_limit_bytes,
                "container_limit_source": self.container_limit_source, "gpus_requested": self.gpus_requested}

    @property
    def gpu_mem_bytes(self) -> int:
        return self.gpu_mem_mib << 20

    def summary(self) -> dict:
        """The facts a Plan reports about the hardware (JSON-ready)."""
        return {"gpu": self.gpu_name, "gpu_mem_mib": self.gpu_mem_mib, "gpu_source": self.gpu_source,
                "gpus_per_node": self.gpus_per_node, "nodes": self.nodes,
                "host_mem_gib": round(self.host_mem_bytes / GiB, 2), "host_mem_source": self.host_mem_source}


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise KvplanError(f"{name} must be a positive number, got {value}")


def apply_limits(cluster: Cluster, options: PlanOptions | None) -> Cluster:
    """The cluster inside a container: its /dev/shm (``shm_gib``), its cgroup memory limit (``container_mem_gib``:
    the host budget too when the node's memory was not given, since the node is unknown then) and the GPUs it is
    given (``gpus_requested``). Without any of them the cluster is unchanged."""
    if options is None:
        return cluster
    changes: dict[str, Any] = {}
    if options.shm_gib is not None:
        changes.update(shm_bytes=int(options.shm_gib * GiB), shm_source=options.shm_source or "--shm-gib")
    elif options.shm_source is not None or options.container_mem_gib is not None:
        changes.update(shm_bytes=None, shm_source=options.shm_source)  # a container elsewhere: not this machine's
    if options.container_mem_gib is not None:
        limit = int(options.container_mem_gib * GiB)
        src = options.container_mem_source or "--container-mem-gib"
        changes.update(container_limit_bytes=limit, container_limit_source=src)
        if options.host_mem_gib is None:
            changes.update(host_mem_bytes=limit, host_mem_source=f"container memory limit ({src})")
    if options.gpus_requested is not None:
        changes["gpus_requested"] = options.gpus_requested
    return replace(cluster, **changes) if changes else cluster


def resolve_cluster(gpu: str | None = None, gpu_mem_mib: int | None = None, gpus_per_node: int | None = None,
                    nodes: int = 1, host_mem_gib: float | None = None, world_size: int = 1,
                    limits: PlanOptions | None = None) -> Cluster:
    """Build the Cluster from options; fill the gaps from this machine (NVML, psutil) and say so."""
    from kvplan.hardware import detect

    _positive("--gpu-mem-mib", gpu_mem_mib)
    _positive("--host-mem-gib", host_mem_gib)
    _positive("--gpus-per-node", gpus_per_node)
    _positive("--nodes", nodes)
    source = "--gpu"
    if gpu_mem_mib:
        name, mib, source = (gpu or "custom GPU"), int(gpu_mem_mib), "--gpu-mem-mib"
    elif gpu:
        from kvplan.hardware.gpus import lookup_gpu

        g = lookup_gpu(gpu)
        name, mib = g.name, g.total_mib
    else:
        local = detect.detect_gpus()
        if not local:
            raise KvplanError("no GPU given and none detected on this machine",
                              "pass --gpu NAME (e.g. h100) or --gpu-mem-mib N")
        name, mib = local[0][0], min(m for _, m in local)  # SGLang takes the min over visible GPUs
        source = "detected (NVML)"
        gpus_per_node = gpus_per_node or len(local)
    # Without --gpus-per-node, the launch's ranks are spread evenly over --nodes.
    per_node = int(gpus_per_node) if gpus_per_node else max(1, -(-world_size // int(nodes)))
    if host_mem_gib:
        host, hsrc = int(host_mem_gib * GiB), "--host-mem-gib"
    else:
        host, hsrc = detect.host_available_bytes(), "detected on this machine (MemAvailable)"
    shm = None if host_mem_gib else detect.shm_bytes()  # /dev/shm is only known for this machine
    return apply_limits(Cluster(gpu_name=name, gpu_mem_mib=mib, gpus_per_node=per_node, nodes=int(nodes),
                                host_mem_bytes=host, host_mem_source=hsrc, shm_bytes=shm, gpu_source=source,
                                shm_source="detected on this machine" if shm is not None else None), limits)
