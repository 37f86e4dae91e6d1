"""Cluster: the hardware a plan is made for, from options first and local detection second.

Whose host? A plan is for **this machine** when its GPU is this machine's: no ``--gpu``/``--gpu-mem-mib`` (the GPU
is detected here through NVML), or ``--gpu``/``--gpu-mem-mib`` naming a GPU NVML finds here, on one node; or when
``--local-host`` says so. Only such a plan takes this machine's MemAvailable (cgroup-capped) and /dev/shm as the
node's. A plan for other hardware (``--gpu h200`` on a laptop, ``--nodes 2``) has unknown host memory unless
``--host-mem-gib`` gives it: host figures then say "not given" and no host fix is sized from this machine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError
from kvplan.units import GiB

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.options import PlanOptions

MAX_GPUS_PER_NODE = 8  # default GPUs per node when --gpus-per-node is not given
NOT_GIVEN = "not given"  # host_mem_source prefix when the node's host memory is unknown


@dataclass(frozen=True)
class HostMemory:
    """The host memory of one node the plan may use: bytes (None: unknown) and where that number came from."""

    bytes: int | None  # host memory the engine can use on one node (MemAvailable at launch); None = unknown
    source: str  # "--host-mem-gib", "this machine's MemAvailable (...)" or "not given (...)"
    shm_bytes: int | None = None  # /dev/shm of the node, known only for this machine
    others_bytes: int | None = None  # this machine only: MemTotal − MemAvailable, held before the launch
    total_bytes: int | None = None  # this machine only: MemTotal

    @property
    def known(self) -> bool:
        return self.bytes is not None


@dataclass(frozen=True)
class Cluster:
    gpu_name: str
    gpu_mem_mib: int  # nvidia-smi memory.total of one GPU
    gpus_per_node: int
    nodes: int
    host_mem_bytes: int | None  # host memory the engine can use on one node (MemAvailable at launch); None: unknown
    host_mem_source: str  # "--host-mem-gib", "this machine's MemAvailable (...)" or "not given (...)"
    shm_bytes: int | None = None
    gpu_source: str = "--gpu"
    shm_source: str | None = None  # "--shm-size 16g", "docker's default 64 MB", "detected on this machine"
    container_limit_bytes: int | None = None  # cgroup memory limit of the engine's container on one node
    container_limit_source: str | None = None  # "resources.limits.memory: 400Gi"
    gpus_requested: int | None = None  # GPUs the container / job is given on one node
    container_request_bytes: int | None = None  # the pod's memory request (what the scheduler reserved for it)
    container_request_source: str | None = None  # "resources.requests.memory: 32Gi"
    host_others_bytes: int | None = None  # this machine only: what other tenants hold (HostMemory.others_bytes)
    host_total_bytes: int | None = None  # this machine only: MemTotal

    def node_limits(self) -> dict[str, Any]:
        """The NodePlan fields the cluster fills beside the host budget: a container's limits (shm, cgroup limit,
        memory request, GPUs given) and, for this machine, what its other tenants already hold."""
        return {"shm_bytes": self.shm_bytes, "shm_source": self.shm_source,
                "host_others_bytes": self.host_others_bytes, "host_total_bytes": self.host_total_bytes,
                "container_limit_bytes": self.container_limit_bytes,
                "container_limit_source": self.container_limit_source, "gpus_requested": self.gpus_requested,
                "container_request_bytes": self.container_request_bytes,
                "container_request_source": self.container_request_source}

    @property
    def gpu_mem_bytes(self) -> int:
        return self.gpu_mem_mib << 20

    def summary(self) -> dict:
        """The facts a Plan reports about the hardware (JSON-ready)."""
        host = None if self.host_mem_bytes is None else round(self.host_mem_bytes / GiB, 2)
        return {"gpu": self.gpu_name, "gpu_mem_mib": self.gpu_mem_mib, "gpu_source": self.gpu_source,
                "gpus_per_node": self.gpus_per_node, "nodes": self.nodes,
                "host_mem_gib": host, "host_mem_source": self.host_mem_source}


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
    if options.shm_gib is not None or options.shm_source is not None or options.container_mem_gib is not None:
        changes.update(host_others_bytes=None, host_total_bytes=None)  # a container's node: not this machine's
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
    if options.container_mem_request_gib is not None:
        changes.update(container_request_bytes=int(options.container_mem_request_gib * GiB),
                       container_request_source=options.container_mem_request_source or "--container-mem-request-gib")
    if options.gpus_requested is not None:
        changes["gpus_requested"] = options.gpus_requested
    return replace(cluster, **changes) if changes else cluster


def host_memory(host_mem_gib: float | None, local: bool, why: str) -> HostMemory:
    """The node's host memory: ``--host-mem-gib`` when given; else this machine's MemAvailable when the plan is for
    this machine (``local``, for the reason ``why``); else unknown."""
    from kvplan.hardware import detect

    if host_mem_gib:
        return HostMemory(int(host_mem_gib * GiB), "--host-mem-gib")  # a given host: its /dev/shm is not known
    if local:
        held = detect.held_by_others()
        return HostMemory(detect.host_available_bytes(), f"this machine's MemAvailable ({why})", detect.shm_bytes(),
                          *(held or (None, None)))
    return HostMemory(None, f"{NOT_GIVEN} ({why})")


def _same_gpu(local: list[tuple[str, int]], gpu: str | None, mib: int | None) -> bool:
    """Whether ``--gpu`` / ``--gpu-mem-mib`` name a GPU NVML finds on this machine."""
    from kvplan.hardware.gpus import lookup_gpu

    if not local:
        return False
    if gpu:
        try:
            want = lookup_gpu(gpu).name
        except KvplanError:
            want = gpu
        names = set()
        for n, _ in local:
            try:
                names.add(lookup_gpu(n).name)
            except KvplanError:
                names.add(n)
        if want not in names:
            return False
    return mib is None or any(m == mib for _, m in local)


def locality(gpu: str | None, gpu_mem_mib: int | None, nodes: int, local_host: bool,
             detected: list[tuple[str, int]] | None = None) -> tuple[bool, str]:
    """(is the plan for this machine, why): ``--local-host``; the GPU detected here; or the GPU given matches this
    machine's, on one node."""
    from kvplan.hardware import detect

    if local_host:
        return True, "--local-host"
    if int(nodes) > 1:
        return False, f"--nodes {nodes} describes other machines"
    if not gpu and not gpu_mem_mib:
        return True, "the GPU was detected here"
    local = detect.detect_gpus() if detected is None else detected
    given = f"--gpu {gpu}" if gpu else f"--gpu-mem-mib {gpu_mem_mib}"
    if _same_gpu(local, gpu, gpu_mem_mib):
        return True, f"{given} is this machine's GPU"
    return False, f"{given} is not this machine's GPU"


def resolve_cluster(gpu: str | None = None, gpu_mem_mib: int | None = None, gpus_per_node: int | None = None,
                    nodes: int = 1, host_mem_gib: float | None = None, world_size: int = 1,
                    limits: PlanOptions | None = None, local_host: bool = False) -> Cluster:
    """Build the Cluster from options; fill the gaps from this machine (NVML, psutil) and say so."""
    from kvplan.hardware import detect

    _positive("--gpu-mem-mib", gpu_mem_mib)
    _positive("--host-mem-gib", host_mem_gib)
    _positive("--gpus-per-node", gpus_per_node)
    _positive("--nodes", nodes)
    source = "--gpu"
    local_gpus: list[tuple[str, int]] | None = None
    if gpu_mem_mib:
        name, mib, source = (gpu or "custom GPU"), int(gpu_mem_mib), "--gpu-mem-mib"
    elif gpu:
        from kvplan.hardware.gpus import lookup_gpu

        g = lookup_gpu(gpu)
        name, mib = g.name, g.total_mib
    else:
        local_gpus = detect.detect_gpus()
        if not local_gpus:
            raise KvplanError("no GPU given and none detected on this machine",
                              "pass --gpu NAME (e.g. h100) or --gpu-mem-mib N")
        name, mib = local_gpus[0][0], min(m for _, m in local_gpus)  # SGLang takes the min over visible GPUs
        source = "detected (NVML)"
        gpus_per_node = gpus_per_node or len(local_gpus)
    # Without --gpus-per-node, the launch's ranks are spread evenly over --nodes, at most 8 GPUs per node (the
    # largest common server: HGX/DGX, MI300X OAM); more ranks than fit spill onto more nodes (--tp 16: 2 × 8).
    per_node = int(gpus_per_node) if gpus_per_node else max(1, min(MAX_GPUS_PER_NODE, -(-world_size // int(nodes))))
    local, why = locality(gpu, gpu_mem_mib, nodes, local_host, local_gpus)  # the nodes the user described
    nodes = max(int(nodes), -(-world_size // per_node))
    host = host_memory(host_mem_gib, local, why)
    return apply_limits(Cluster(gpu_name=name, gpu_mem_mib=mib, gpus_per_node=per_node, nodes=int(nodes),
                                host_mem_bytes=host.bytes, host_mem_source=host.source, shm_bytes=host.shm_bytes,
                                gpu_source=source, host_others_bytes=host.others_bytes,
                                host_total_bytes=host.total_bytes,
                                shm_source="detected on this machine" if host.shm_bytes is not None else None),
                        limits)
