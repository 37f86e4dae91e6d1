"""Number formats of the HTML report. Every figure names its unit: GiB = 2^30 bytes, GB/TB = 10^9/10^12 bytes.

The same strings as the terminal report (``report/human.py``) where both show a figure.
"""

from __future__ import annotations

import math

from kvplan.units import GB, GiB


def gib(n_bytes: float) -> str:
    """``17.76 GiB``, ``350.2 GiB``, ``449 GiB`` (a whole number of GiB drops its decimals), ``2,235 GiB``."""
    v = n_bytes / GiB
    if abs(v) < 100:
        return f"{v:,.2f} GiB"
    if abs(v) < 1000 and abs(v - round(v)) >= 0.05:
        return f"{v:,.1f} GiB"
    return f"{round(v):,} GiB"


def host(n_bytes: float) -> str:
    """Host memory in both units, decimal first: ``2.40 TB (2,235 GiB)``, ``300.0 GB (279.4 GiB)``."""
    if abs(n_bytes) >= 1e12:
        return f"{n_bytes / 1e12:,.2f} TB ({n_bytes / GiB:,.0f} GiB)"
    return f"{n_bytes / GB:,.1f} GB ({n_bytes / GiB:,.1f} GiB)"


def count(n: float | None) -> str:
    return "–" if n is None else f"{n:,.0f}"


def num(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def pct(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:+.{digits}f} %"


def nice_step(span: float, ticks: int = 6) -> float:
    """A 1-2-5 step that cuts ``span`` into about ``ticks`` intervals."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return float(m * mag)
    return float(10 * mag)


def ticks(hi: float, n: int = 6) -> list[float]:
    """Tick values from 0 to ``hi`` (inclusive of the last tick not above hi)."""
    step = nice_step(hi, n)
    out, v = [], 0.0
    while v <= hi * 1.0001:
        out.append(round(v, 10))
        v += step
    return out
