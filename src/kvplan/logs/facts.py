"""What a log says, as typed facts. Every field is optional: a partial log gives a partial LogFacts.

Units are the engines' own, named in the field: SGLang's "GB" figures are GiB (``*_gib``); HiCache host sizes
are decimal GB (``*_gb``); vLLM prints GiB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RankFacts:
    """One rank's startup figures (SGLang TPn / vLLM worker)."""

    dist_init_mem_gib: float | None = None  # SGLang "Init torch distributed ends. mem usage=" / "Memory baseline taken"
    load_begin_avail_gib: float | None = None  # SGLang "Load weight begin. avail mem="
    load_end_avail_gib: float | None = None
    weights_gib: float | None = None  # SGLang "Load weight end ... mem usage=" / vLLM "Model loading took"
    kv_tokens: int | None = None  # SGLang "KV Cache is allocated. #tokens:"
    k_size_gib: float | None = None
    v_size_gib: float | None = None
    kv_size_gib: float | None = None  # MLA single buffer
    kv_dtype: str | None = None
    pool_end_avail_gib: float | None = None  # SGLang "Memory pool end. avail mem="
    graph_begin_avail_gib: float | None = None
    graph_mem_gib: float | None = None  # "Capture cuda graph end ... mem usage=" / vLLM "Graph capturing ... took"
    graph_end_avail_gib: float | None = None
    host_pool_gb: float | None = None  # SGLang HiCache "Allocating X GB host memory" (decimal GB)
    host_pool_tokens: int | None = None
    available_kv_gib: float | None = None  # vLLM "Available KV cache memory:"
    total_gpu_gib: float | None = None  # vLLM V0 "total_gpu_memory (X GiB)"
    non_torch_gib: float | None = None
    activation_peak_gib: float | None = None
    cudagraph_estimate_gib: float | None = None  # vLLM "Estimated CUDA graph memory: X GiB"


@dataclass
class LogFacts:
    engine: str | None = None  # the registry name of the engine that printed it (kvplan.engines.ENGINES)
    version: str | None = None  # printed by the log
    version_hint: str | None = None  # inferred from line formats (e.g. "sglang <= 0.5.9 format")
    args: dict[str, Any] = field(default_factory=dict)  # launch args the log shows (engine's own names)
    model: str | None = None
    ranks: dict[str, RankFacts] = field(default_factory=dict)  # "TP0", "TP1", "rank=2", "Worker_TP0", "" (no prefix)
    kv_tokens: int | None = None  # SGLang max_total_num_tokens / vLLM "GPU KV cache size"
    max_running_requests: int | None = None
    context_len: int | None = None
    chunked_prefill_size: int | None = None
    available_gpu_mem_gib: float | None = None  # SGLang summary line
    gpu_blocks: int | None = None  # vLLM "# GPU blocks" / "# cuda blocks"
    cpu_blocks: int | None = None
    max_concurrency: float | None = None
    concurrency_len: int | None = None  # the "for N tokens per request" of vLLM's concurrency line
    device_word: str | None = None  # vLLM "GPU" / "CPU" KV cache size
    errors: list[str] = field(default_factory=list)  # recognised error lines (as printed, trimmed)
    lines_read: int = 0
    lines_matched: int = 0

    def rank(self, label: str) -> RankFacts:
        return self.ranks.setdefault(label, RankFacts())

    def first_rank(self) -> RankFacts | None:
        """Rank 0 (every rank number in its label is 0: TP0, DP0 TP0, PP0 TP0, rank=0) if present, else the first
        rank seen."""
        import re

        for label, facts in self.ranks.items():
            nums = re.findall(r"\d+", label)
            if nums and all(n == "0" for n in nums):
                return facts
        if "" in self.ranks:
            return self.ranks[""]
        return next(iter(self.ranks.values()), None)
