"""Options every front door (check, plan, explain, launch, diagnose) passes to an engine's plan."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlanOptions:
    gpu: str | None = None
    gpu_mem_mib: int | None = None
    gpus_per_node: int | None = None
    nodes: int = 1
    host_mem_gib: float | None = None  # host memory available to the engine on one node
    engine_version: str | None = None
    model_config: str | None = None
    weights_gib: float | None = None  # per rank
    free_gib: float | None = None  # per rank, free GPU memory before weights load
    avg_tokens: int = 4096  # prompt + output tokens of a typical request
    kv_memory_gib: float | None = None  # per rank, KV memory as a vLLM startup log printed it (replaces profiling)
