"""The GPU an SGLang log ran on, from its memory lines (``kvplan explain LOG`` without ``--gpu``).

SGLang prints no device total. What it prints bounds it from below: the free memory before the weights
("Load weight begin. avail mem=P GB", else "Load weight end ... avail mem=A GB, mem usage=W GB": P = A + W) plus
what distributed init took ("Init torch distributed ends. mem usage=" / 0.5.21+ "Memory baseline taken"); the CUDA
context and other processes sit on top. SGLang's "GB" are GiB (``get_available_gpu_memory`` divides by 1 << 30,
https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/utils/common.py).

The KV pool does not depend on that total once P and the weights are known (``ModelRunner.profile_max_num_token``
takes ``total_gpu_memory`` = P, https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/model_executor/
model_runner.py); only the defaults SGLang picks by GPU size (mem_fraction_static, cuda_graph_max_bs,
chunked_prefill_size when the ServerArgs dump does not show them) and the headroom figures do.
"""

from __future__ import annotations

from kvplan.engines.loggpu import LogGpu, from_lower_bound
from kvplan.logs.facts import LogFacts

# CUDA context + other holders above the free memory at distributed init: 0.65 GiB (MI300X TP1, 191.98 total vs
# 191.33 free), 1.4 GiB (B200, 179.06 vs 177.57 + 0.09), 4.4 GiB (MI355X TP8, 287.98 vs 283.53): the logs of
# ../shared/logcorpus (llmtracker-sglang03-mi300x-llama3-8b-bench, repo-glm5-fp8-mi355x-tp8-fp8kv) and
# tests/data/preflight (sglang-skilllog-qwen3-8b-b200-main202604). A catalog GPU within this above the bound is taken.
CONTEXT_SLACK_GIB = 5.0


def free_before_weights_gib(facts: LogFacts) -> float | None:
    """P, the minimum over ranks (what SGLang takes), from "Load weight begin" or "Load weight end" avail + usage."""
    ranks = list(facts.ranks.values())
    frees = [r.load_begin_avail_gib for r in ranks if r.load_begin_avail_gib is not None]
    if not frees:
        frees = [r.load_end_avail_gib + r.weights_gib for r in ranks
                 if r.load_end_avail_gib is not None and r.weights_gib is not None]
    return min(frees) if frees else None


def log_gpu(facts: LogFacts) -> LogGpu | None:
    p = free_before_weights_gib(facts)
    if p is None or p <= 0:
        return None
    inits = [r.dist_init_mem_gib for r in facts.ranks.values() if r.dist_init_mem_gib is not None]
    init = max(inits) if inits else 0.0
    low = p + max(0.0, init)
    how = (f"≥ {low:.2f} GiB: free before weights {p:.2f} GiB"
           + (f" + distributed init {init:.2f} GiB" if inits else "")
           + " (SGLang prints no device total; the smallest catalog GPU up to "
           f"{CONTEXT_SLACK_GIB:g} GiB above it is taken)")
    return from_lower_bound(low, how, CONTEXT_SLACK_GIB)
