"""SGLang's free-memory baseline T per rank, before weights: GPU total minus what the process already holds.

Mechanism (``model_runner.py::ModelRunner.init_torch_distributed``, 0.4.x-0.5.x; the min over ranks is T):

    overhead = context + communicators                       T = memory.total - overhead   (per rank)
    context        CUDA/HIP context and early allocations (before ``init_distributed_environment``); set by the
                   platform, driver and runtime, not by the launch: one value per platform, from TP1 logs
    communicators  0 at TP1; else the TP group's PyNccl/RCCL communicator (NCCL channel buffers, NVLS multicast
                   buffers on NVSwitch systems; host-memory transport without P2P on GeForce cards), its warm-up
                   all-reduce, the custom all-reduce (``custom_all_reduce.py``: meta + buffer + rank_data of
                   ``_MAX_CAR_SIZE`` = 8 MiB each on CUDA, 16 MiB on ROCm) and on ROCm gfx942+ the QuickAllReduce
                   (``quick_all_reduce.py``, 2 GB default max size). These do not grow with the TP size (ring and
                   NVLS buffers are per channel, not per peer), but they depend on the interconnect: one value
                   per link class, from multi-GPU logs.

Both values are medians over the sourced logs in ``baseline_data.py`` (few, noisy logs per class, several derived
with the context of the others: the median's leave-one-out error over all logs is the lower, 0.227 vs 0.236 GiB).
The transports differ by link class (NVLS multicast buffers on NVSwitch, NCCL P2P buffers in GPU memory on PCIe
cards with P2P, host-memory SHM buffers on GeForce cards without P2P), so a class uses its own logs, even a single
one, with a band widened where it has fewer than three; a class with no log takes its family's (PCIe with and
without P2P), and a GPU whose family has no log falls back to its platform (all link classes) with a wider band. The
band is the spread of the logs (min..max) plus their rounding. ``residuals(leave_one_out=True)`` predicts each log
from the others (for a single-log class: from its family or platform).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from kvplan.engines.sglang.baseline_data import POINTS, BaselinePoint
from kvplan.hardware.links import link_class


def median(values: Sequence[float]) -> float:
    """``statistics.median``'s own arithmetic (the middle value, or the mean of the two middle ones), without importing
    statistics (fractions, decimal, random) on the CLI's start-up."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        raise ValueError("no median for empty data")
    if n % 2 == 1:
        return data[n // 2]
    return (data[n // 2 - 1] + data[n // 2]) / 2


GiB = 1 << 30
# PCIe with P2P (NCCL P2P buffers in GPU memory) and without (GeForce: NCCL's SHM transport keeps them in host
# memory) are one family only for a class that has no log of its own
FAMILY = {"nvswitch": "nvswitch", "pcie-p2p": "pcie", "geforce": "pcie", "rocm": "rocm"}
CLASS_EXAMPLE = {"nvswitch": "NVIDIA H100 80GB HBM3", "pcie-p2p": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                 "geforce": "NVIDIA GeForce RTX 4090", "rocm": "AMD Instinct MI300X"}
ROUNDING_GIB = 0.05  # two-decimal log figures, a few of them summed
FEW = 3  # classes with fewer logs than this get a wider band
# Classes whose communicator memory grows with the ranks on the node: PCIe cards with P2P keep NCCL's P2P transport
# buffers in GPU memory for each peer connection, and the logs grow with the peers (per-peer 0.08-0.2 GiB: A100 PCIe
# TP2 ~0.16, RTX 6000 Ada TP4 0.19, RTX PRO 6000 TP4 0.39, TP8 ~0.6 implied by the incident); NVSwitch's NVLS
# multicast buffers and GeForce's host-memory SHM transport do not (their logs show no growth).
PER_PEER = frozenset({"pcie-p2p"})


@dataclass(frozen=True)
class Estimate:
    """Bytes held per rank before T is measured (T = memory.total - value), with a plausible range."""

    value_bytes: int
    low_bytes: int
    high_bytes: int
    source: str

    @property
    def value_gib(self) -> float:
        return self.value_bytes / GiB


@dataclass(frozen=True)
class _Fit:
    ctx: dict[str, tuple[float, ...]]  # platform -> context GiB of each log
    comm: dict[str, tuple[float, ...]]  # link -> communicator GiB of each multi-GPU log


def _fit(points: tuple[BaselinePoint, ...]) -> _Fit:
    ctx: dict[str, list[float]] = {}
    for p in points:
        if p.tp_local == 1:
            ctx.setdefault(p.platform, []).append(p.overhead_gib - (p.comm_gib or 0.0))
        elif p.comm_gib is not None:
            ctx.setdefault(p.platform, []).append(p.overhead_gib - p.comm_gib)
    comm: dict[str, list[float]] = {}
    for p in points:
        if p.tp_local > 1:
            c = p.comm_gib if p.comm_gib is not None else p.overhead_gib - median(ctx[p.platform])
            comm.setdefault(p.link, []).append(c / (p.tp_local - 1) if p.link in PER_PEER else c)
    return _Fit({k: tuple(v) for k, v in ctx.items()}, {k: tuple(v) for k, v in comm.items()})


def _range(values: tuple[float, ...], floor_gib: float) -> tuple[float, float, float]:
    """(median, low, high) of a class, widened when it has few logs."""
    m, lo, hi = median(values), min(values), max(values)
    widen = ROUNDING_GIB + (max(floor_gib, 0.5 * m) if len(values) < FEW else 0.0)
    return m, max(0.0, lo - widen), hi + widen


def _estimate(fit: _Fit, gpu_name: str | None, ranks_per_node: int) -> Estimate:
    platform, link = link_class(gpu_name)
    ctx_vals = fit.ctx.get(platform) or fit.ctx["cuda"]
    c, c_lo, c_hi = _range(ctx_vals, 0.15)
    why = f"{platform} context {c:.2f} GiB (median of {len(ctx_vals)} logs)"
    if ranks_per_node <= 1:
        m, lo, hi = c, c_lo, c_hi
    else:
        vals = fit.comm.get(link, ())
        fam = tuple(v for lk, vs in fit.comm.items() if FAMILY.get(lk) == FAMILY.get(link) for v in vs)
        if vals and link in PER_PEER:  # per peer: the class's logs as GiB per other rank on the node
            peers = ranks_per_node - 1
            k, k_lo, k_hi = (x * peers for x in _range(vals, 0.3 / peers))
            why += (f" + {link} communicators {k:.2f} GiB ({k / peers:.2f} per peer x {peers}, median of "
                    f"{len(vals)} {link} logs)")
        elif vals:  # the class's own logs (a single log: its value, the band widened in _range)
            k, k_lo, k_hi = _range(vals, 0.3)
            why += f" + {link} communicators {k:.2f} GiB (median of {len(vals)} {link} log{'s' * (len(vals) > 1)})"
        elif len(fam) >= 2:  # no log of this class: its family (PCIe with and without P2P)
            k, k_lo, k_hi = _range(fam, 0.3)
            why += f" + {FAMILY[link]} communicators {k:.2f} GiB (median of {len(fam)} {FAMILY[link]} logs)"
        else:  # no family either: the platform's classes, wider
            same = [v for lk, vs in fit.comm.items() for v in vs
                    if link_class_platform(lk) == platform] or [v for vs in fit.comm.values() for v in vs]
            k, k_lo, k_hi = _range(tuple(same), 0.3)
            k_lo, k_hi = max(0.0, k_lo - 0.3), k_hi + 0.3
            why += f" + communicators {k:.2f} GiB (no '{link}' log: median of the {platform} classes, wider band)"
        m, lo, hi = c + k, c_lo + k_lo, c_hi + k_hi
    return Estimate(int(m * GiB), int(lo * GiB), int(hi * GiB), why + "; engines/sglang/baseline_data.py")


def link_class_platform(link: str) -> str:
    return "rocm" if link == "rocm" else "cuda"


@lru_cache(maxsize=1)
def _default_fit() -> _Fit:
    return _fit(POINTS)


@lru_cache(maxsize=512)
def baseline_overhead(gpu: str | None, ranks_per_node: int) -> Estimate:
    """GPU memory a rank holds before SGLang measures T, for this GPU (name as nvidia-smi/amd-smi print it, or
    None) and this many ranks of the launch on one node. T = memory.total - value (low/high: the range)."""
    return _estimate(_default_fit(), gpu, max(1, ranks_per_node))


@dataclass(frozen=True)
class Residual:
    point: BaselinePoint
    modelled_t_gib: float
    low_t_gib: float  # T at the high overhead
    high_t_gib: float  # T at the low overhead

    @property
    def residual_gib(self) -> float:
        """Modelled minus logged T."""
        return self.modelled_t_gib - self.point.t_gib

    @property
    def inside(self) -> bool:
        return self.low_t_gib <= self.point.t_gib <= self.high_t_gib


def residuals(leave_one_out: bool = False) -> list[Residual]:
    """Each log's T against the model (fitted on all logs, or on all the others)."""
    out = []
    for i, p in enumerate(POINTS):
        fit = _fit(POINTS[:i] + POINTS[i + 1:]) if leave_one_out else _default_fit()
        name = CLASS_EXAMPLE[p.link]  # the log's class (several logs name a capacity class, not a product)
        try:
            e = _estimate(fit, name, p.tp_local)
        except KeyError:  # leaving out the only log of a platform
            continue
        out.append(Residual(p, p.total_gib - e.value_bytes / GiB, p.total_gib - e.high_bytes / GiB,
                            p.total_gib - e.low_bytes / GiB))
    return out
