"""Units. Bytes are ints inside kvplan; GiB (2**30) and decimal GB (1e9) appear only at the edges.

Engines mix them: SGLang logs say "GB" but mean GiB, while ``--hicache-size`` is decimal GB.
Field names carry the unit (``kv_pool_gib``, ``host_kv_bytes``).
"""

from __future__ import annotations

GiB = 1 << 30
MiB = 1 << 20
GB = 10**9


def fmt_gib(n_bytes: float) -> str:
    """GPU-side figures: ``12.34 GiB``."""
    return f"{n_bytes / GiB:,.2f} GiB"


def fmt_host(n_bytes: float) -> str:
    """Host-side figures in both units, as the engines' flags mean them: ``300.0 GB (279.4 GiB)``,
    ``2.40 TB (2,235 GiB)``."""
    if n_bytes < 1e12:
        return f"{n_bytes / GB:,.1f} GB ({n_bytes / GiB:,.1f} GiB)"
    return f"{n_bytes / 1e12:,.2f} TB ({n_bytes / GiB:,.0f} GiB)"


def fmt_term(n_bytes: int, host: bool = False) -> str:
    """A named term of any size: ``fmt_host`` / ``fmt_gib`` from 0.01 GiB, else ``512.0 KiB`` / ``6.41 MiB``."""
    if n_bytes >= GiB // 100 or n_bytes == 0:
        return fmt_host(n_bytes) if host else fmt_gib(n_bytes)
    return f"{n_bytes / MiB:,.2f} MiB" if n_bytes >= MiB else f"{n_bytes / 1024:,.1f} KiB"


def _compact(n: int) -> str:
    """``121,432`` -> ``121K``, ``2,504,169`` -> ``2.50M``, ``9,750`` -> ``9.75K``: three significant digits."""
    for div, unit in ((1_000_000, "M"), (1_000, "K")):
        if abs(n) >= div:
            x = n / div
            return f"{x:.3g}{unit}" if x < 100 else f"{x:.0f}{unit}"
    return f"{n:,}"


def fmt_count_band(value: int, low: int, high: int) -> str:
    """A count with its error band: ``116,895 (112K–121K)``; the bare count when the band collapses (exact)."""
    if low == high == value:
        return f"{value:,}"
    return f"{value:,} ({_compact(low)}–{_compact(high)})"
