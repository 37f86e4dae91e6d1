"""Memory sizes as deployment files write them (``kvplan.quantity``, below the engines, which read stacks' own
files too)."""

from kvplan.quantity import docker_bytes, k8s_bytes, slurm_mem_bytes

__all__ = ["docker_bytes", "k8s_bytes", "slurm_mem_bytes"]
