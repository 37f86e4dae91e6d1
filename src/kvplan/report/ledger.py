"""The host ledger as ``kvplan check`` prints it: one row per term of one node's host memory, then each phase's
total against the node's budget, the margin and the time to pin."""

from __future__ import annotations

from typing import Any

from kvplan.hostmem import BOTH, PAGE_CACHE, HostLedger, LedgerRow
from kvplan.units import GiB

PHASE_SHORT = {("loading",): "load", ("steady",): "steady", ("loading", "steady"): "both"}


def _value(r: LedgerRow) -> str:
    lo, hi = r.node_range
    band = "" if lo == hi else f" ({lo / GiB:,.1f}–{hi / GiB:,.1f})"
    each = f"{r.count} × {r.bytes_each / GiB:,.2f} = " if r.count != 1 else ""
    return f"{each}{r.node_bytes / GiB:,.2f} GiB{band}"


def _how(r: LedgerRow) -> str:
    kind = "reclaimable page cache, not in the peak" if r.memory == PAGE_CACHE else r.memory
    return f"{r.scope}; {kind}; {r.certainty}: {r.source}"


def table(led: HostLedger, make_table: Any) -> Any:
    """A Rich table (``make_table(title, columns)``) of the ledger's rows."""
    t = make_table("Host ledger (one node)", ("term", "value", "phase", "how"))
    for r in led.rows:
        t.add_row(r.what, _value(r), PHASE_SHORT.get(r.phases, "/".join(r.phases)), _how(r))
    return t


def summary(led: HostLedger) -> list[str]:
    """The totals per phase, the peak against the budget with its margin, and the pin time."""
    out = []
    for ph in BOTH:
        t = led.total(ph)
        out.append(f"{ph}: {t.bytes / GiB:,.1f} GiB ({t.low / GiB:,.1f}–{t.high / GiB:,.1f})")
    pk, budget = led.peak, led.budget
    line = "host ledger per node: " + "; ".join(out)
    if budget is None:
        line += "; node memory not given"
    else:
        margin = budget[0] - pk.bytes
        line += (f"; {pk.phase} peak {pk.bytes / GiB:,.1f} GiB = {pk.bytes / budget[0]:.1%} of {budget[0] / GiB:,.1f}"
                 f" GiB ({budget[1]}): margin {margin / GiB:,.1f} GiB"
                 + (" (OVER)" if margin < 0 else ""))
    lines = [line]
    others = led.others_line()
    if others:
        lines.append(others)
    if led.pinned_bytes:
        s, fast, slow = led.pin_seconds()
        rate = led.pin_rate
        lines.append(f"pinning {led.pinned_bytes / 1e9:,.0f} GB per node: about {_dur(s)} at {rate.value / 1e9:g} "
                     f"GB/s ({_dur(fast)}–{_dur(slow)} at {rate.high / 1e9:g}–{rate.low / 1e9:g} GB/s; serialized "
                     "in the driver)")
    return lines


def _dur(seconds: float) -> str:
    return f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.1f} min"
