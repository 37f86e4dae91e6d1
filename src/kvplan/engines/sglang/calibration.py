"""Figures SGLang's code does not fix but real logs show, kept as auditable data with their source.

They feed only estimates that a log would otherwise tell (free memory after distributed init, CUDA-graph
memory, allocator metadata). Each can be overridden from the CLI, and the plan says which were used.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.sglang.baseline import Estimate, baseline_overhead

__all__ = ["Calibration", "Estimate", "baseline_overhead", "POOL_MISC", "GRAPH_DENSE", "GRAPH_LARGE_MOE",
           "RECOMMENDED_AVAIL", "graph_estimate"]


@dataclass(frozen=True)
class Calibration:
    value_gib: float
    what: str
    source: str


# GPU memory a rank holds before SGLang's baseline P (T) is taken: CUDA/HIP context + communicators, per GPU
# family and TP size, from the sourced logs in baseline_data.py (baseline.py has the mechanism and residuals).
# P = memory.total - baseline_overhead(gpu, ranks_per_node).value_bytes; low/high bound it.

# Allocator free lists and small metadata between "KV Cache is allocated" and "Memory pool end".
POOL_MISC = Calibration(
    0.17, "slack 9.43 GiB - req_to_token 1.00 GiB - pool end 8.26 GiB (Llama-3.1-8B, TP1)",
    "https://github.com/sgl-project/sglang/pull/4760")

# Decode CUDA-graph memory ("Capture cuda graph end ... mem usage=X GB"), by model class.
GRAPH_DENSE = Calibration(
    1.0, "8B-class dense, decode bs<=256-512: 0.54-1.44 GB in logs",
    "https://github.com/sgl-project/sglang/pull/12978 (1.00 GB), #10088 (0.54 GB), #11830 (1.44 GB)")
GRAPH_LARGE_MOE = Calibration(
    3.75, "Kimi-K2.5 (DeepSeek-V3 arch) TP8 on RTX PRO 6000, sglang 0.5.9: 'Capture cuda graph end ... "
    "mem usage=3.75 GB' on every rank", "../shared/seeds/000_2f4a389718a4204b.txt (the incident log)")

# available_gpu_mem after CUDA graphs that the SGLang docs recommend (docs say 5-8 GB; kvplan warns below 4).
RECOMMENDED_AVAIL = Calibration(
    4.0, "docs/advanced_features/hyperparameter_tuning.md: keep available_gpu_mem at about 5-8 GB; "
    "kvplan warns below 4 GiB to leave room for its own estimate error",
    "https://github.com/sgl-project/sglang/blob/main/docs/advanced_features/hyperparameter_tuning.md")


def graph_estimate(is_moe: bool, total_params: int) -> Calibration:
    return GRAPH_LARGE_MOE if (is_moe and total_params > 100e9) else GRAPH_DENSE
