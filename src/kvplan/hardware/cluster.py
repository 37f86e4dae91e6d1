"""Cluster: the hardware a plan is made for, from options first and local detection second."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.units import GiB


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


def resolve_cluster(gpu: str | None = None, gpu_mem_mib: int | None = None, gpus_per_node: int | None = None,
                    nodes: int = 1, host_mem_gib: float | None = None, world_size: int = 1) -> Cluster:
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
    return Cluster(gpu_name=name, gpu_mem_mib=mib, gpus_per_node=per_node, nodes=int(nodes),
                   host_mem_bytes=host, host_mem_source=hsrc, shm_bytes=shm, gpu_source=source)
