"""The per-rank KV budget of a vLLM launch as typed data: what was taken out of the GPU, with each term's range.

An integrator derives an error band from the terms: every estimated term at its low end gives the largest KV
budget, at its high end the smallest (``Budget.available_range_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BudgetTerm:
    """One amount taken out of ``nvidia-smi total x gpu_memory_utilization`` on one rank, with its range.

    ``low_bytes == bytes == high_bytes`` when the term is exact (given, or fixed by the engine's code)."""

    name: str  # "torch-total-reserve" | "weights" | "activation-peak" | "non-torch" | "cudagraph-estimate" | ...
    bytes: int
    low_bytes: int
    high_bytes: int
    source: str

    @property
    def estimated(self) -> bool:
        return self.low_bytes != self.high_bytes

    def to_dict(self) -> dict:
        return {"name": self.name, "bytes": self.bytes, "low_bytes": self.low_bytes, "high_bytes": self.high_bytes,
                "source": self.source}


@dataclass(frozen=True)
class Budget:
    available_bytes: int  # per rank, for the KV cache
    source: str
    exact: bool  # True when the engine takes the number as given (no profiling)
    requested_bytes: int | None = None  # ceil(total × utilization), total as torch sees it
    non_kv_bytes: int | None = None
    cudagraph_bytes: int = 0
    weights_bytes: int = 0
    notes: tuple[str, ...] = ()
    terms: tuple[BudgetTerm, ...] = ()  # what was subtracted; empty when the KV size is given
    available_low_bytes: int | None = None  # every estimated term at its high end (None: = available_bytes)
    available_high_bytes: int | None = None

    @property
    def available_range_bytes(self) -> tuple[int, int]:
        lo = self.available_bytes if self.available_low_bytes is None else self.available_low_bytes
        hi = self.available_bytes if self.available_high_bytes is None else self.available_high_bytes
        return lo, hi

    def term(self, name: str) -> BudgetTerm | None:
        return next((t for t in self.terms if t.name == name), None)
