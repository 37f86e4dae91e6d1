"""How far each estimated term of a KV budget is off on real logs: the spreads the error band is built from.

``spreads.json`` (next to this module) holds, per engine and component (and engine-version range where the
component's error depends on it), the signed error of kvplan's figure against every public startup log that
prints the component, each observation naming its case (``tests/data/preflight/cases.jsonl`` or the development
corpus ``../shared/logcorpus``). A term's spread is a high quantile of those errors' magnitudes:

    spread = Q_q(|e_1|, ..., |e_n|)      (q = ``QUANTILE``, linear interpolation between order statistics)

in the component's unit ("fraction": of the term's own value; "GiB": absolute). With fewer than ``MIN_LOGS``
observations the component has no spread here and the engine keeps its hand-read range (the calibration module's
low/high, ``models.weights_band``). Components:

- ``weights``: per-rank weights as the engine loads them (vLLM ``Model loading took``, SGLang ``Load weight end ...
  mem usage``) vs the estimate from config.json / safetensors headers; fraction of the weights.
- ``activation-peak`` / ``non-torch`` (vLLM, per version range): the profile run's logged peak and non-torch memory.
- ``residual``: what the terms leave unexplained: the logged KV memory's error once the printed terms' errors are
  taken out (vLLM: ``Available KV cache memory`` error + the weights, activation and non-torch errors, on logs that
  print all of them; SGLang: the K+V size's error − (mem_fraction_static × free-memory error − weights error));
  fraction of the KV memory.

Regenerate (the observations are recomputed from the logs and the current planner; the band's own width never
feeds back into them): ``PYTHONPATH=src python benchmarks/preflight.py --corpus tests/data/preflight --corpus
../shared/logcorpus --write-spreads``. The preflight benchmark's leave-one-out drops a log's own observations
(``excluding``) before planning it again, so a log never sets its own band.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PATH = Path(__file__).with_name("spreads.json")
QUANTILE = 0.9
MIN_LOGS = 3
_excluded: frozenset[str] = frozenset()  # case ids left out (the benchmark's leave-one-out)


@dataclass(frozen=True)
class Spread:
    """A component's spread from ``n`` logs: ``value`` in ``unit`` ("fraction" | "GiB")."""

    value: float
    unit: str
    n: int
    cases: tuple[str, ...]

    def bytes_of(self, term_bytes: int) -> int:
        """The spread in bytes for a term of ``term_bytes`` (a fraction scales with it)."""
        return int(self.value * term_bytes) if self.unit == "fraction" else int(self.value * (1 << 30))


def version_range(engine: str, version: str | None) -> str:
    """The engine-version range an error is kept under: the engine's own eras (``Engine.spread_era``)."""
    from kvplan.engines import get_engine

    return get_engine(engine).spread_era(version)


def minor_of(version: str | None) -> int | None:
    """The minor number of ``0.X...`` (None when it does not parse): what the engines' eras are cut by."""
    try:
        return int(str(version).split(".")[1])
    except (IndexError, ValueError):
        return None


def quantile(values: list[float], q: float = QUANTILE) -> float:
    """Q_q of ``values`` with linear interpolation between order statistics (numpy's default)."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    i = int(pos)
    return xs[i] if i + 1 >= len(xs) else xs[i] + (pos - i) * (xs[i + 1] - xs[i])


@lru_cache(maxsize=1)
def _table() -> dict:
    return dict(json.loads(PATH.read_text(encoding="utf-8"))["components"])


@lru_cache(maxsize=64)
def spread(engine: str, component: str, version: str | None = None) -> Spread | None:
    """The component's spread for this engine (and the version's range when the table keeps it per range), from
    every observation not excluded; None with fewer than ``MIN_LOGS`` (the engine keeps its hand-read range)."""
    table = _table()
    entry = table.get(f"{engine}/{component}@{version_range(engine, version)}") or table.get(f"{engine}/{component}")
    if entry is None:
        return None
    obs = [o for o in entry["observations"] if o["case"] not in _excluded]
    if len(obs) < MIN_LOGS:
        return None
    return Spread(quantile([abs(float(o["error"])) for o in obs]), str(entry["unit"]), len(obs),
                  tuple(str(o["case"]) for o in obs))


@contextlib.contextmanager
def excluding(case_ids: frozenset[str]) -> Iterator[None]:
    """Every spread computed without these cases' observations (leave-one-out), restored on exit."""
    global _excluded
    old = _excluded
    _excluded = frozenset(case_ids)
    spread.cache_clear()
    try:
        yield
    finally:
        _excluded = old
        spread.cache_clear()


def observed_weights_fraction(engine: str) -> float | None:
    """The ``weights`` spread (fraction of the per-rank weights) for this engine, None below ``MIN_LOGS``."""
    s = spread(engine, "weights")
    return None if s is None else s.value


def residual_fraction(engine: str, hand: float) -> float:
    """What the terms leave unexplained, as a fraction of the KV memory: the ``residual`` spread when enough logs
    print every term, else ``hand`` (``models.weights_band.MODEL_RESIDUAL_FRACTION``)."""
    s = spread(engine, "residual")
    return hand if s is None else s.value
