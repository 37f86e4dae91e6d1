"""The window: samples of the last S seconds, summed over DP ranks / engines, as the numbers rules read.

Every count is the server's own: running and queued requests and generation throughput add up over the sources
that print them (SGLang DP-attention groups, vLLM engines); pool usage is the mean over sources (each source has
its own pool). The in-flight request length is KV tokens in use / running requests.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from kvplan.logs.serving import Sample

LOAD_KINDS = ("decode", "stats", "metrics")


@dataclass
class Window:
    engine: str | None
    samples: list[Sample] = field(default_factory=list)  # load samples in the window (decode / stats / metrics)
    prefills: list[Sample] = field(default_factory=list)
    span_s: float | None = None
    sources: tuple[str, ...] = ()
    running: float | None = None  # mean, summed over sources
    running_max: int | None = None
    queued: float | None = None
    queued_max: int | None = None
    usage: float | None = None  # mean over samples and sources, 0-1
    usage_min: float | None = None
    usage_max: float | None = None
    gen_tps: float | None = None  # mean, summed over sources
    gen_tps_max: float | None = None
    prompt_tps: float | None = None
    per_request_tps: float | None = None  # generation tokens/s of one running request (sum gen / sum running)
    tokens_in_use: float | None = None  # mean KV tokens in use, summed over sources (SGLang #token)
    prefix_hit: float | None = None
    prefix_hit_first: float | None = None
    prefix_hit_last: float | None = None
    external_hit: float | None = None
    host_usage_max: float | None = None
    swapped_max: int | None = None
    preemptions: int = 0
    retractions: int = 0
    accept_len: float | None = None
    rate_slope: tuple[float, float, float, float] | None = None  # (running lo, hi, per-request tps at lo, at hi)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def scope(self) -> str:
        src = ", ".join(s for s in self.sources if s)
        n = self.n or len(self.prefills)
        span = f" over {self.span_s:.0f} s" if self.span_s else ""
        return f"{n} sample{'s' if n != 1 else ''}{span}" + (f", {src}" if src else "")


def _vals(samples: Iterable[Sample], attr: str) -> list[Any]:
    return [v for v in (getattr(s, attr) for s in samples) if v is not None]


def _summed_mean(samples: list[Sample], attr: str) -> float | None:
    by: dict[str, list[float]] = {}
    for s in samples:
        v = getattr(s, attr)
        if v is not None:
            by.setdefault(s.source, []).append(v)
    return sum(mean(v) for v in by.values()) if by else None


def _slope(samples: list[Sample]) -> tuple[float, float, float, float] | None:
    pts = [(s.running, s.gen_tps / s.running) for s in samples if s.running and s.gen_tps]
    if len(pts) < 3:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    lo, hi = min(xs), max(xs)
    if hi < 1.5 * lo:
        return None
    mx, my = mean(xs), mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else 0.0
    return lo, hi, my + b * (lo - mx), my + b * (hi - mx)


def build(samples: list[Sample], engine: str | None, window_s: float | None = None) -> Window:
    """Summarise the samples of the last ``window_s`` seconds (all of them when None or without timestamps)."""
    times = [s.t for s in samples if s.t is not None]
    if window_s is not None and times:
        end = max(times)
        samples = [s for s in samples if s.t is None or s.t >= end - window_s]
        times = [s.t for s in samples if s.t is not None]
    load = [s for s in samples if s.kind in LOAD_KINDS]
    pre = [s for s in samples if s.kind == "prefill"]
    base = load or pre
    w = Window(engine=engine, samples=load, prefills=pre)
    w.span_s = (max(times) - min(times)) if len(times) >= 2 else None
    w.sources = tuple(sorted({s.source for s in base}))
    w.running, w.queued = _summed_mean(base, "running"), _summed_mean(base, "queued")
    run, que = _vals(base, "running"), _vals(base, "queued")
    w.running_max, w.queued_max = (max(run) if run else None), (max(que) if que else None)
    us = _vals(base, "usage")
    if us:
        w.usage, w.usage_min, w.usage_max = mean(us), min(us), max(us)
    w.gen_tps = _summed_mean(load, "gen_tps")
    gens = _vals(load, "gen_tps")
    w.gen_tps_max = max(gens) if gens else None
    w.prompt_tps = _summed_mean(load or pre, "prompt_tps")
    pairs = [(s.gen_tps, s.running) for s in load if s.gen_tps is not None and s.running]
    if pairs and sum(p[1] for p in pairs):
        w.per_request_tps = sum(p[0] for p in pairs) / sum(p[1] for p in pairs)
    w.tokens_in_use = _summed_mean(base, "tokens")
    hits = [s for s in (pre if any(s.prefix_hit is not None for s in pre) else load) if s.prefix_hit is not None]
    rates = [s.prefix_hit for s in hits if s.prefix_hit is not None]
    if rates:
        w.prefix_hit = mean(rates)
        k = max(1, len(rates) // 3)
        w.prefix_hit_first, w.prefix_hit_last = mean(rates[:k]), mean(rates[-k:])
    ext = _vals(load, "external_hit")
    w.external_hit = mean(ext) if ext else None
    host = _vals(samples, "host_usage")
    w.host_usage_max = max(host) if host else None
    sw = _vals(base, "swapped")
    w.swapped_max = max(sw) if sw else None
    w.preemptions = int(sum(_vals(samples, "preemptions")))
    w.retractions = int(sum(_vals([s for s in samples if s.kind == "retract"], "retracted")))
    if any(s.kind == "metrics" for s in load):  # a retraction gauge read at each scrape
        w.retractions += int(sum(_vals(load, "retracted")))
    acc = _vals(load, "accept_len")
    w.accept_len = mean(acc) if acc else None
    w.rate_slope = _slope(load)
    return w


def in_flight_tokens(w: Window, pool_tokens: int | None) -> tuple[float | None, str]:
    """KV tokens one running request holds on average in the window, and how it was measured."""
    if not w.running:
        return None, ""
    if w.tokens_in_use:
        return w.tokens_in_use / w.running, "KV tokens in use / running requests (the server's own counts)"
    if w.usage is not None and pool_tokens:
        how = f"KV usage {w.usage:.0%} × {pool_tokens:,} pool tokens / running requests"
        return w.usage * pool_tokens / w.running, how
    return None, ""

