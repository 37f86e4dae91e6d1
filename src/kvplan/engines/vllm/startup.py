"""vLLM's start-up check of its request (v1/worker/utils.py::request_memory,
https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/utils.py): it asks for ceil(total ×
gpu_memory_utilization) per GPU and refuses to start when less than that is free at its memory snapshot, which
is taken after the CUDA context, NCCL and cuBLAS exist.

    free at start-up ≈ nvidia-smi total − reserve − STARTUP_CONTEXT      (the report's failure band)
    the rule gpu-util-startup-fail: total = nvidia-smi total − reserve, free = total − STARTUP_CONTEXT
    reserve: the GPU's own (calibration.catalogued_reserve, hardware/gpus.json), else TORCH_TOTAL_RESERVE /
    STARTUP_DRIVER_RESERVE
"""

from __future__ import annotations

from kvplan.engines.vllm.calibration import (
    STARTUP_CONTEXT,
    STARTUP_DRIVER_RESERVE,
    TORCH_TOTAL_RESERVE,
    catalogued_reserve,
)
from kvplan.units import GiB

CONTEXT_BYTES = int(STARTUP_CONTEXT.value * GiB)


def _reserve_gib(gpu_name: str | None, fallback: float) -> float:
    r = catalogued_reserve(gpu_name)
    return r.value if r is not None else fallback


def free_at_startup_bytes(gpu_total_bytes: int, gpu_name: str | None = None) -> int:
    """GPU memory free per rank when vLLM checks its request, on a GPU of ``gpu_total_bytes`` (nvidia-smi total)."""
    return gpu_total_bytes - int(_reserve_gib(gpu_name, TORCH_TOTAL_RESERVE.value) * GiB) - CONTEXT_BYTES


def rule_total_and_free_bytes(gpu_total_bytes: int, gpu_name: str | None = None) -> tuple[int, int]:
    """(the GPU total the check's message quotes, what is free after the CUDA context), as gpu-util-startup-fail
    takes them: torch's total, the catalog's figure for this GPU when it has one."""
    total = gpu_total_bytes - int(_reserve_gib(gpu_name, STARTUP_DRIVER_RESERVE.value) * GiB)
    return total, total - CONTEXT_BYTES
