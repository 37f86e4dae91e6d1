"""Options every front door (check, plan, explain, launch, diagnose) passes to an engine's plan. The command line's
hardware-and-inputs options are derived from these fields (kvplan.cli.options): name, type, default and help."""

from __future__ import annotations

from dataclasses import dataclass, field


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class PlanOptions:
    gpu: str | None = field(default=None, metadata=_help(
        "GPU name as nvidia-smi prints it, or an alias (h100, rtx-pro-6000, ...)"))
    gpu_mem_mib: int | None = field(default=None, metadata=_help(
        "GPU memory.total in MiB, for GPUs not in the catalog"))
    gpus_per_node: int | None = field(default=None, metadata=_help(
        "GPUs per node (default: ranks of the launch, up to 8)"))
    nodes: int = field(default=1, metadata=_help("nodes of the launch (default 1)"))
    host_mem_gib: float | None = field(default=None, metadata=_help(  # host memory available to the engine, one node
        "host memory available to the engine per node, GiB (default: MemAvailable here)"))
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
