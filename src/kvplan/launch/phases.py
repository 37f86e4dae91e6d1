"""Startup phases of an engine, read from its log lines.

Phase names are stable (they appear in ``--events`` files): ``start`` (before any recognised line), ``dist_init``,
``weights``, ``kv_pool``, ``cuda_graphs``, ``host_pool``, ``ready``. Each engine has its own patterns and its own
order (``Engine.startup_phases``, engines/<engine>/launch.py); a line only moves the tracker *forward* in that order,
because multi-rank logs interleave (rank 3's "Load weight begin" after rank 0's "Load weight end" must not move back
to ``weights``). Until the engine is known (a wrapper script), a line only one engine prints settles it
(``Engine.log_signature``), and every engine's patterns apply in the canonical order ``PHASES``. A ``tqdm`` line
("Loading safetensors checkpoint shards:  45% Completed | 29/64", "Capturing CUDA graphs ...: 40%|####  | 27/67")
gives the percentage of the current phase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

PHASES = ("start", "dist_init", "weights", "kv_pool", "cuda_graphs", "host_pool", "ready")
_PERCENT = re.compile(r"(\d{1,3})%(?:\s*Completed)?\s*\|")
_COUNT = re.compile(r"\|\s*(\d+)/(\d+)\b")
Table = tuple[tuple[str, re.Pattern[str]], ...]


@dataclass(frozen=True)
class _Tables:
    by_engine: dict[str, Table]  # (phase, regex) in each engine's startup order
    order: dict[str, tuple[str, ...]]  # each engine's phase order, "start" first
    generic: Table  # until the engine is known: every engine's patterns, registry order
    signatures: tuple[tuple[str, re.Pattern[str]], ...]  # lines only one engine prints


def _tables() -> _Tables:
    from kvplan.engines import ENGINES

    return _compiled(tuple(ENGINES.items()))


@lru_cache(maxsize=4)
def _compiled(registry: tuple[tuple[str, str], ...]) -> _Tables:
    from kvplan.engines import get_engine

    by: dict[str, Table] = {}
    order: dict[str, tuple[str, ...]] = {}
    sigs = []
    for e in (get_engine(name) for name, _ in registry):
        by[e.name] = tuple((phase, re.compile(rx)) for phase, rx in e.startup_phases)
        order[e.name] = ("start", *(phase for phase, _ in e.startup_phases))
        if e.log_signature:
            sigs.append((e.name, re.compile(e.log_signature)))
    return _Tables(by, order, tuple(t for table in by.values() for t in table), tuple(sigs))


@dataclass(frozen=True)
class Change:
    """What one log line changed: a new phase, or the percentage of the current one."""

    kind: str  # "phase" | "progress"
    phase: str
    percent: float | None = None
    done: int | None = None
    total: int | None = None


class PhaseTracker:
    """Feed it log lines; it reports phase changes (forward only) and tqdm percentages."""

    def __init__(self, engine: str | None = None):
        self.engine = engine if engine in _tables().by_engine else None
        self.phase = "start"
        self.percent: float | None = None
        self.last_line = ""

    @property
    def order(self) -> tuple[str, ...]:
        return _tables().order.get(self.engine or "", PHASES)

    def _table(self) -> Table:
        return _tables().by_engine[self.engine] if self.engine else _tables().generic

    def enter(self, phase: str) -> Change | None:
        """Move to *phase* if it is later than the current one (also used for readiness seen over HTTP)."""
        order = self.order
        if phase not in order or order.index(phase) <= order.index(self.phase):
            return None
        self.phase, self.percent = phase, None
        return Change("phase", phase)

    def feed(self, line: str) -> list[Change]:
        line = line.strip()
        if not line:
            return []
        self.last_line = line
        if self.engine is None:
            for name, rx in _tables().signatures:
                if rx.search(line):
                    self.engine = name
                    break
        out: list[Change] = []
        for phase, rx in self._table():
            if phase != "ready" and rx.search(line):  # readiness is confirmed over HTTP (see supervisor)
                ch = self.enter(phase)
                if ch:
                    out.append(ch)
                break
        m = _PERCENT.search(line)
        if m and self.phase not in ("start", "ready"):
            pct = min(100.0, float(m.group(1)))
            c = _COUNT.search(line)
            done, total = (int(c.group(1)), int(c.group(2))) if c else (None, None)
            if pct != self.percent:
                self.percent = pct
                out.append(Change("progress", self.phase, pct, done, total))
        return out

    def says_ready(self, line: str) -> bool:
        """The engine's own "ready" line (any engine's while it is unknown; used when there is no URL to ask)."""
        return any(phase == "ready" and rx.search(line) for phase, rx in self._table())


def split_lines(buf: str) -> tuple[list[str], str]:
    """Complete lines of *buf* (tqdm rewrites its line with ``\\r``, so that ends a line too) and the rest."""
    parts = re.split(r"\r\n|\r|\n", buf)
    return parts[:-1], parts[-1]
