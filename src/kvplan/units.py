"""Units. Bytes are ints inside kvplan; GiB (2**30) and decimal GB (1e9) appear only at the edges.

Engines mix them: SGLang logs say "GB" but mean GiB, while ``--hicache-size`` is decimal GB.
Field names carry the unit (``kv_pool_gib``, ``host_kv_bytes``).
"""

from __future__ import annotations

GiB = 1 << 30
MiB = 1 << 20
GB = 10**9


def gib(n_bytes: float) -> float:
    return n_bytes / GiB


def gb(n_bytes: float) -> float:
    return n_bytes / GB


def fmt_bytes(n_bytes: float) -> str:
    """Human form that names its unit: ``2.40 TB (2183.9 GiB)`` style for big host numbers."""
    if abs(n_bytes) >= 1e12:
        return f"{n_bytes / 1e12:.2f} TB ({n_bytes / GiB:,.1f} GiB)"
    return f"{n_bytes / GiB:,.2f} GiB"
