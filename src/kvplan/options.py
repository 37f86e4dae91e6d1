"""Options every front door (check, plan, explain, launch, diagnose) passes to an engine's plan. The command line's
hardware-and-inputs options are derived from these fields (kvplan.cli.options): name, type, default and help."""

from __future__ import annotations

from dataclasses import dataclass, field


def _help(text: str) -> dict[str, str]:
    return {"help": text}


def _internal(text: str) -> dict[str, object]:
    """A field set by code (kvplan.deploy), not a command-line option."""
    return {"help": text, "cli": False}


@dataclass(frozen=True)
class PlanOptions:
    gpu: str | None = field(default=None, metadata=_help(
        "GPU name as nvidia-smi prints it, or an alias (h100, rtx-pro-6000, ...)"))
    gpu_mem_mib: int | None = field(default=None, metadata=_help(
        "GPU memory.total in MiB, for GPUs not in the catalog"))
    gpus_per_node: int | None = field(default=None, metadata=_help(
        "GPUs per node (default: the launch's ranks per node, at most 8; more ranks span more nodes)"))
    nodes: int = field(default=1, metadata=_help(
        "nodes of the launch (default 1, or as many as the ranks need at --gpus-per-node); host figures are per node"))
    host_mem_gib: float | None = field(default=None, metadata=_help(  # host memory available to the engine, one node
        "host memory available to the engine on one node, GiB (MemAvailable there). Default: this machine's "
        "MemAvailable when the plan is for this machine (its GPU detected here, --gpu naming the GPU NVML finds "
        "here, or --local-host); otherwise unknown"))
    local_host: bool = field(default=False, metadata=_help(
        "the plan is for this machine: take its MemAvailable and /dev/shm as the node's even though --gpu "
        "is given (e.g. a GPU NVML cannot see)"))
    engine_version: str | None = field(default=None, metadata=_help(
        "engine version (default: installed one, else newest known)"))
    model_config: str | None = field(default=None, metadata=_help(
        "config.json or checkpoint directory (else local HF cache or catalog)"))
    weights_gib: float | None = field(default=None, metadata=_help(  # per rank
        "weights per rank in GiB (overrides the checkpoint size)"))
    free_gib: float | None = field(default=None, metadata=_help(  # per rank, free GPU memory before weights load
        "free GPU memory per rank before weights load, GiB (e.g. from a log's 'Load weight begin')"))
    avg_tokens: int = field(default=4096, metadata=_help(  # prompt + output tokens of a typical request
        "tokens per request (prompt+output), default 4096"))
    kv_memory_gib: float | None = field(default=None, metadata=_help(  # per rank, replaces vLLM's profiling
        "vLLM: KV memory per rank as a startup log printed it ('Available KV cache memory: X GiB')"))
    # A container's limits (kvplan.deploy fills them from a manifest; --shm-gib / --container-mem-gib by hand)
    shm_gib: float | None = field(default=None, metadata=_help(  # per node (one container per node)
        "size of /dev/shm per node, GiB (a container's --shm-size; default: this machine's when detected)"))
    container_mem_gib: float | None = field(default=None, metadata=_help(  # per node: the cgroup that OOM-kills
        "container (cgroup) memory limit per node, GiB: the kernel OOM-kills the container above it"))
    gpus_requested: int | None = field(default=None, metadata=_help(  # per node (pod / container / Slurm node)
        "GPUs the container or job is given per node (checked against the launch's ranks per node)"))
    container_mem_request_gib: float | None = field(default=None, metadata=_help(  # per node: what the scheduler keeps
        "the pod's memory request per node, GiB (resources.requests.memory): what the scheduler reserved for it; "
        "above it the kubelet evicts the pod first under node memory pressure"))
    shm_source: str | None = field(default=None, metadata=_internal("where the /dev/shm size comes from"))
    container_mem_source: str | None = field(default=None, metadata=_internal("where the memory limit comes from"))
    container_mem_request_source: str | None = field(default=None, metadata=_internal(
        "where the memory request comes from"))
