"""The GPU a vLLM log ran on, from its memory lines (``kvplan explain LOG`` without ``--gpu``).

Printed totals first: V0 "the current vLLM instance can use total_gpu_memory (T GiB) x gpu_memory_utilization"
(``worker/worker.py::determine_num_available_blocks``, https://github.com/vllm-project/vllm/blob/v0.6.6/vllm/worker/
worker.py), V1 >= 0.21 "Free memory on device (F/T GiB) on startup" (``v1/worker/utils.py::request_memory``). T is
torch's total, a little under nvidia-smi's memory.total (``calibration.TORCH_TOTAL_RESERVE``). Else the request it
printed ("can use ... = R GiB") divided by the utilization. Else a lower bound: the request covers the weights and
the KV memory ("Model loading took W GiB", "Available KV cache memory: K GiB"), so T ≥ (W + K) / utilization.

With "Available KV cache memory" in the log the blocks do not depend on the total at all; it only sizes what vLLM
derives from the GPU (its request ceil(T × utilization), the start-up check, the per-GPU-class batch defaults).
"""

from __future__ import annotations

from kvplan.engines.loggpu import LogGpu, from_lower_bound, from_torch_total
from kvplan.logs.facts import LogFacts

DEFAULT_UTILIZATION = 0.9  # CacheConfig.gpu_memory_utilization default, every release (vllm/config.py)


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def is_cpu_log(facts: LogFacts) -> bool:
    """The CPU backend's log: "CPU KV cache size" (>= 0.30), device_config=cpu, or its "set (a/b) GiB for KV cache"
    line (node memory)."""
    return (str(facts.device_word or "").upper() == "CPU" or str(facts.args.get("device_config", "")).lower() == "cpu"
            or facts.args.get("node_memory_gib") is not None)


def log_gpu(facts: LogFacts) -> LogGpu | None:
    from kvplan.engines.vllm.calibration import TORCH_TOTAL_RESERVE

    if is_cpu_log(facts):
        return None  # vLLM-CPU: the KV cache is in host memory; there is no GPU to infer
    reserve = TORCH_TOTAL_RESERVE.value
    ranks = list(facts.ranks.values())
    totals = [r.total_gpu_gib for r in ranks if r.total_gpu_gib]
    if totals:
        t = min(totals)
        return from_torch_total(t, f"{t:.2f} GiB device total printed by the log (torch's total; nvidia-smi's is "
                                   f"about {reserve:g} GiB more)", reserve)
    util = _num(facts.args.get("gpu_memory_utilization"))
    req = _num(facts.args.get("requested_memory_gib"))
    if req and util and util <= 1:
        t = req / util
        return from_torch_total(t, f"{t:.2f} GiB = the {req:.2f} GiB request the log printed / utilization "
                                   f"{util:g}", reserve)
    util = util if util and util <= 1 else DEFAULT_UTILIZATION
    weights = [r.weights_gib for r in ranks if r.weights_gib is not None]
    kv = [r.available_kv_gib for r in ranks if r.available_kv_gib is not None]
    if not kv:
        return None
    w, k = (max(weights) if weights else 0.0), max(0.0, min(kv))
    low = (w + k) / util
    slack = max(4.0, 0.15 * low)
    parts = f"weights {w:.2f} + KV memory {k:.2f} GiB" if weights else f"KV memory {k:.2f} GiB (weights not printed)"
    how = (f"≥ {low:.2f} GiB = ({parts}) / utilization {util:g} (the log prints no device total; the smallest "
           f"catalog GPU up to {slack:.1f} GiB above is taken)")
    return from_lower_bound(low, how, slack)
