"""Each replica's window from three range queries, as the Samples ``diagnose --url`` makes of its scrapes.

The grid: ``start, start + step, ..., end``. At most ``MAX_POINTS`` steps per series, and at most ``CELL_BUDGET``
values held for the whole fleet (8 bytes each, ``array('d')``): a window of hours is read at a coarser step, a
large fleet too, so memory follows the series count, never the window. Every answer element is folded into its
replica's arrays as it streams in and dropped; names read only at the window's end (histogram sums, the pool gauge)
keep one value. A replica's samples are then made one scrape at a time by ``metrics.page_sample``, the function
``--url`` uses: the values of step k form a page summary (sums and peaks over the replica's label sets, already
taken by Prometheus), and the counters' growth since the previous scrape gives the rates.

Hostile answers: a point off the grid, a timestamp or value that is not a number, NaN, infinities, negative values
and series of no known replica are left out and counted (``ignored``), as ``--url`` leaves out such samples.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

from kvplan.diagnose.fleet.discover import Key, Replica
from kvplan.diagnose.fleet.query import REPLICA_LABELS, Names
from kvplan.diagnose.metrics import Scrape, ServerView, page_sample
from kvplan.diagnose.prom import Agg, PageSummary

MAX_POINTS = 600  # steps per series (diagnose --url: at most 600 scrapes)
CELL_BUDGET = 1_000_000  # values held for the whole fleet (8 MB)
MIN_STEP_S = 1.0
NAN = float("nan")


@dataclass(frozen=True)
class Grid:
    start: float
    step: float
    n: int

    @property
    def end(self) -> float:
        return self.start + (self.n - 1) * self.step

    def index(self, t: float) -> int | None:
        k = round((t - self.start) / self.step)
        return k if 0 <= k < self.n and abs(self.start + k * self.step - t) < 0.002 else None  # ms timestamps


def grid(end: float, window_s: float, series: int) -> Grid:
    """The steps over [end - window_s, end]: at most MAX_POINTS, fewer when ``series`` arrays would pass the
    CELL_BUDGET; never finer than MIN_STEP_S (a whole number of milliseconds)."""
    points = max(2, min(MAX_POINTS, CELL_BUDGET // max(1, series)))
    step = math.ceil(max(MIN_STEP_S, window_s / (points - 1)) * 1000) / 1000
    n = int(window_s / step + 1e-9) + 1
    return Grid(round(end - (n - 1) * step, 3), step, n)


@dataclass
class Track:
    """One replica's values on the grid (NaN: no value at that step)."""

    scrapes: array[float]  # the time of the scrape each step's values come from
    values: dict[str, array[float]] = field(default_factory=dict)
    last: dict[str, tuple[int, float]] = field(default_factory=dict)  # last-only names: (step, value)


@dataclass
class Reader:
    names: Names
    grid: Grid
    replicas: dict[Key, Replica]
    tracks: dict[Key, Track] = field(default_factory=dict)
    ignored: dict[Key, list[str]] = field(default_factory=dict)  # up to 3 examples per replica
    counts: dict[Key, int] = field(default_factory=dict)  # points left out per replica
    stray: int = 0  # series of no discovered replica, or of the wrong shape

    def track(self, key: Key) -> Track:
        t = self.tracks.get(key)
        if t is None:
            t = self.tracks[key] = Track(array("d", [NAN]) * self.grid.n)
        return t

    def _points(self, el: Any) -> tuple[Key, str, list[Any]] | None:
        if not isinstance(el, dict) or not isinstance(el.get("metric"), dict) or not isinstance(el.get("values"),
                                                                                                  list):
            self.stray += 1
            return None
        metric = el["metric"]
        key = tuple(str(metric.get(k, ""))[:256] for k in REPLICA_LABELS)
        if key not in self.replicas:
            self.stray += 1
            return None
        return key, str(metric.get("__name__", "")), el["values"]

    def _value(self, key: Key, what: str, p: Any) -> tuple[int, float] | None:
        """(step, value) of one point, or None (a note for a point that is no finite number >= 0)."""
        if not isinstance(p, list) or len(p) != 2 or not isinstance(p[0], (int, float)) or isinstance(p[0], bool):
            self._ignore(key, f"{what} point {str(p)[:30]}")
            return None
        k = self.grid.index(float(p[0]))
        try:
            v = float(p[1]) if isinstance(p[1], str) else NAN
        except ValueError:
            v = NAN
        if k is None or not math.isfinite(v) or v < 0:
            self._ignore(key, f"{what} {str(p[1])[:20]}" if k is not None else f"{what} off the grid at {p[0]}")
            return None
        return k, v

    def _ignore(self, key: Key, example: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
        examples = self.ignored.setdefault(key, [])
        if len(examples) < 3:
            examples.append(example)

    def on_scrapes(self, el: Any) -> None:
        got = self._points(el)
        if got is None:
            return
        key, _, points = got
        tr = self.track(key)
        for p in points:
            kv = self._value(key, "scrape time", p)
            if kv is not None:
                tr.scrapes[kv[0]] = kv[1]

    def on_values(self, el: Any) -> None:
        got = self._points(el)
        if got is None:
            return
        key, name, points = got
        if name not in self.replicas[key].names:
            self.stray += 1
            return
        tr = self.track(key)
        if name in self.names.last_only:
            for p in points:
                kv = self._value(key, name, p)
                if kv is not None and kv[0] >= tr.last.get(name, (-1, 0.0))[0]:
                    tr.last[name] = kv
            return
        arr = tr.values.get(name)
        if arr is None:
            arr = tr.values[name] = array("d", [NAN]) * self.grid.n
        for p in points:
            kv = self._value(key, name, p)
            if kv is not None:
                arr[kv[0]] = kv[1]

    def view(self, rep: Replica) -> ServerView:
        """The replica as ``--url`` would have seen it over the window (its samples, the last totals, its config
        labels and model), its arrays then dropped."""
        view = ServerView(engine=rep.engine, url=rep.instance)
        view.cache_config = dict(rep.config)
        view.models = [{"id": rep.model, "root": rep.model}] if rep.model else []
        tr = self.tracks.pop(rep.key, None)
        examples, view.ignored = self.ignored.pop(rep.key, []), self.counts.pop(rep.key, 0)
        if examples:
            view.note(f"ignored {view.ignored} point(s) of the answers (not a finite number >= 0, or off the "
                      f"grid): {', '.join(examples)}")
        if tr is None:
            return view
        prev: Scrape | None = None
        for k in range(self.grid.n):
            t = tr.scrapes[k]
            if math.isnan(t) or (prev is not None and t <= prev.t):
                continue  # no scrape yet, or the same scrape as the step before
            page = PageSummary(frozenset())
            for name, arr in tr.values.items():
                v = arr[k]
                if not math.isnan(v):
                    page.aggs[name] = Agg(v, v, 1)
            cur = Scrape(t, page)
            view.samples.append(page_sample(view, prev, cur))
            view.n_scrapes += 1
            view.last_totals.update({n: a.total for n, a in page.aggs.items()})
            prev = cur
        view.last_totals.update({n: v for n, (_, v) in tr.last.items()})
        return view
