"""Typed results of the engine hooks that explain, diagnose and launch call (kvplan.engines.base.Engine)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kvplan.logs.facts import LogFacts


@dataclass
class Comparison:
    """One figure a log printed next to the plan's (``kvplan explain``), with the tolerance the log's own rounding
    allows (its GiB figures have two decimals)."""

    field: str
    scope: str  # "per rank" | "per replica"
    observed: float | int | None
    predicted: float | int | None
    tolerance: float  # relative tolerance the log's own rounding allows
    note: str = ""

    @property
    def error_pct(self) -> float | None:
        if self.observed in (None, 0) or self.predicted is None:
            return None
        return (self.predicted - self.observed) / self.observed * 100

    @property
    def ok(self) -> bool | None:
        e = self.error_pct
        return None if e is None else abs(e) <= self.tolerance * 100

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "scope": self.scope, "observed": self.observed, "predicted": self.predicted,
                "error_pct": None if self.error_pct is None else round(self.error_pct, 4),
                "within_rounding": self.ok, "note": self.note}


class StartupDialect(Protocol):
    """An engine's startup-log parser (engines/<engine>/log.py): streams any size, never raises."""

    def looks_like(self, line: str) -> bool: ...  # a line only this engine prints

    def parse(self, lines: Iterable[str]) -> LogFacts: ...
