"""Bounded-memory statistics: latency histograms with 1 % log bins and a self-coarsening time series.

Nothing keeps one entry per request: a histogram holds ~3,000 counters whatever the count (1 % log bins from 1 µs
to 5 years: quantiles within ±0.5 % of the exact order statistic), and the time series merges neighbouring buckets
when it grows past its limit, so a job of 10^7 requests costs the same memory as one of 10^5.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import repeat

_LOG_BASE = math.log(1.01)
_INV = 1.0 / _LOG_BASE
_MIN = 1e-6  # seconds: values below go to the first bin
_OFF = float(-int(math.log(_MIN) * _INV) + 1)  # keys = floor(log(x) / log 1.01) + OFF >= 1 for x >= _MIN
_FLUSH = 1024


class LogHistogram:
    """``add`` is the C-level ``list.append`` of a small buffer; every ``_FLUSH`` values (and before a query) the
    buffer is binned in C (``map`` + ``Counter.update``), so a value costs a few opcodes."""

    __slots__ = ("counts", "n", "total", "lo", "hi", "buf", "add")

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.n = 0
        self.total = 0.0
        self.lo = math.inf
        self.hi = -math.inf
        self.buf: list[float] = []
        self.add = self.buf.append

    def flush(self) -> None:
        b = self.buf
        if not b:
            return
        self.n += len(b)
        self.total += math.fsum(b)
        self.hi = max(self.hi, max(b))
        self.lo = min(self.lo, min(b))
        self.counts.update(map(int, map(_OFF.__add__, map(_INV.__mul__, map(math.log, map(max, b, repeat(_MIN)))))))
        b.clear()

    def maybe_flush(self) -> None:
        if len(self.buf) >= _FLUSH:
            self.flush()

    @property
    def bins(self) -> dict[int, int]:
        """Non-empty bins (key -> count)."""
        self.flush()
        return dict(self.counts)

    def quantile(self, q: float) -> float | None:
        self.flush()
        if not self.n:
            return None
        rank = q * (self.n - 1)
        seen = 0
        for k in sorted(self.counts):
            seen += self.counts[k]
            if seen > rank:
                mid = math.exp((k - _OFF + 0.5) * _LOG_BASE)
                return min(max(mid, self.lo), self.hi)
        return self.hi

    @property
    def mean(self) -> float | None:
        self.flush()
        return self.total / self.n if self.n else None

    def summary(self, scale: float = 1.0, digits: int = 4) -> dict:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v * scale, digits)

        self.flush()
        return {"mean": r(self.mean), "p50": r(self.quantile(0.5)), "p90": r(self.quantile(0.9)),
                "p99": r(self.quantile(0.99)), "max": r(self.hi if self.n else None), "n": self.n}


class TimeSeries:
    """Time-weighted means of running, queued and KV usage, and tokens per second, over buckets of width ``w``."""

    __slots__ = ("w", "limit", "buckets")

    def __init__(self, width_s: float = 1.0, limit: int = 400):
        self.w = width_s
        self.limit = limit
        self.buckets: dict[int, list[float]] = {}  # index -> [dt, running·dt, queued·dt, usage·dt, gen, prompt]

    def _spread(self, t0: float, t1: float, vals: tuple[float, ...], offset: int, weighted: bool) -> None:
        w = self.w
        i = int(t0 // w)
        if t1 < (i + 1) * w:  # fast path: one bucket
            b = self.buckets.get(i)
            if b is None:
                b = self.buckets[i] = [0.0] * 6
            if weighted:
                dt = t1 - t0
                b[0] += dt
                for k, v in enumerate(vals):
                    b[offset + k] += v * dt
            else:
                for k, v in enumerate(vals):
                    b[offset + k] += v
            return
        while t1 // self.w - t0 // self.w > self.limit:
            self._coarsen()
        if t1 <= t0:
            b = self._bucket(int(t0 // self.w))
            for k, v in enumerate(vals):
                b[offset + k] += v
            return
        span = t1 - t0
        i, t = int(t0 // self.w), t0
        while t < t1:
            end = min(t1, (i + 1) * self.w)
            dt = end - t
            b = self._bucket(i)
            if weighted:
                b[0] += dt
                for k, v in enumerate(vals):
                    b[offset + k] += v * dt
            else:
                for k, v in enumerate(vals):
                    b[offset + k] += v * dt / span
            t, i = end, i + 1
        if len(self.buckets) > self.limit:
            self._coarsen()

    def occupancy(self, t0: float, t1: float, running: float, queued: float, usage: float) -> None:
        if t1 > t0:
            self._spread(t0, t1, (running, queued, usage), 1, True)

    def interval(self, t0: float, t1: float, running: float, queued: float, usage: float, gen: float,
                 prompt: float) -> None:
        """Occupancy and tokens of one interval (t1 > t0), in one pass over the buckets it covers."""
        while t1 // self.w - t0 // self.w > self.limit:
            self._coarsen()
        w, buckets = self.w, self.buckets
        span = t1 - t0
        g, p = gen / span, prompt / span
        i, t = int(t0 // w), t0
        while t < t1:
            end = (i + 1) * w
            if end > t1:
                end = t1
            dt = end - t
            b = buckets.get(i)
            if b is None:
                b = buckets[i] = [0.0] * 6
            b[0] += dt
            b[1] += running * dt
            b[2] += queued * dt
            b[3] += usage * dt
            b[4] += g * dt
            b[5] += p * dt
            t, i = end, i + 1
        if len(buckets) > self.limit:
            self._coarsen()

    def tokens(self, t0: float, t1: float, gen: float, prompt: float = 0.0) -> None:
        if gen or prompt:
            self._spread(t0, t1, (gen, prompt), 4, False)

    def _bucket(self, i: int) -> list[float]:
        b = self.buckets.get(i)
        if b is None:
            b = self.buckets[i] = [0.0] * 6
        return b

    def _coarsen(self) -> None:
        merged: dict[int, list[float]] = {}
        for i, b in self.buckets.items():
            m = merged.setdefault(i // 2, [0.0] * 6)
            for k in range(6):
                m[k] += b[k]
        self.buckets = merged
        self.w *= 2

    def points(self, sum_over: int = 1) -> list[dict]:
        """One point per bucket; running and queued are summed over ``sum_over`` instances."""
        out = []
        for i in sorted(self.buckets):
            dt, r, q, u, g, p = self.buckets[i]
            out.append({"t": round(i * self.w, 3),
                        "running": round(r / dt * sum_over, 2) if dt else None,
                        "queued": round(q / dt * sum_over, 2) if dt else None,
                        "kv_usage": round(u / dt, 4) if dt else None,
                        "gen_tps": round(g / self.w, 2), "prompt_tps": round(p / self.w, 2)})
        return out
