"""The GPU a log was written on, from the memory figures it printed: what ``kvplan explain LOG`` plans with when no
``--gpu`` is given (a log pasted into a ticket is read far from the GPUs that wrote it).

An engine's ``Engine.log_gpu(facts)`` returns a ``LogGpu``: the ``nvidia-smi memory.total`` (MiB) the plan uses, and
how it was obtained. ``exact`` is True when the log printed the device total (vLLM "total_gpu_memory (X GiB)",
"Free memory on device (F/T GiB)"), False when only a lower bound follows from it (SGLang's free memory before the
weights; vLLM's request divided by its utilization). Either way the total is placed on a catalog GPU when one lies
in the bound's range, so the engine's GPU-size thresholds see a real card's memory.total.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.units import GiB

MiB = 1 << 20


@dataclass(frozen=True)
class LogGpu:
    mem_mib: int  # nvidia-smi memory.total of one GPU (MiB), as the plan takes it
    how: str  # where it came from, in words (names the log line)
    exact: bool  # True: the log printed the device total; False: a lower bound from what the log printed

    @property
    def label(self) -> str:
        """The GPU name the plan reports: not a product name (the log does not print one)."""
        kind = "total printed" if self.exact else "inferred"
        return f"GPU of the log ({self.mem_mib / 1024:.1f} GiB, {kind})"


def catalog_mib(low_bytes: float, high_bytes: float) -> int | None:
    """The smallest catalog memory.total (MiB) within [low, high] bytes, or None."""
    from kvplan.hardware.gpus import all_gpus

    cands = sorted({g.total_mib for g in all_gpus() if g.total_mib and low_bytes <= g.total_mib * MiB <= high_bytes})
    return cands[0] if cands else None


def from_torch_total(total_gib: float, how: str, reserve_gib: float) -> LogGpu:
    """The device total torch reported (``torch.cuda.mem_get_info()[1]``, a little below nvidia-smi's memory.total:
    ``reserve_gib`` is the engine's calibrated gap): a catalog GPU whose total lies in [T, T + 2 × reserve] GiB, else
    T + reserve."""
    lo = total_gib * GiB
    mib = catalog_mib(lo, lo + 2 * max(reserve_gib, 0.5) * GiB)
    return LogGpu(mib if mib is not None else round((total_gib + reserve_gib) * 1024), how, True)


def from_lower_bound(low_gib: float, how: str, slack_gib: float) -> LogGpu:
    """A device of at least ``low_gib`` GiB: the smallest catalog GPU in [low, low + slack] GiB, else low rounded up
    to the next GiB (``exact`` False: the figures that depend on the total are estimates)."""
    lo = low_gib * GiB
    mib = catalog_mib(lo, lo + slack_gib * GiB)
    return LogGpu(mib if mib is not None else int(-(-low_gib // 1)) * 1024, how, False)
