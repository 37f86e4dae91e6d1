"""Read a live server over HTTP, over a window, tolerant of missing metrics and of hostile answers.

Endpoints: Prometheus ``/metrics`` (names per engine: ``Engine.metrics``), the engine's own info endpoints
(``Engine.info_paths``, e.g. SGLang ``/get_server_info``), OpenAI ``/v1/models`` (``max_model_len``, ``root``) and
an engine's config-info metric (vLLM ``cache_config_info`` labels). Gauges are read at every scrape; rates
(generation/prompt tokens per second, preemptions, prefix hits) come from counter differences between scrapes.

Bounded whatever the server does (``diagnose.http``): one deadline per request, a byte cap per scrape (a note says
when a page was truncated), redirects only within the same host and port, no proxy for loopback. Each page is
summarised while it streams in (``diagnose.prom``): only the previous and the current page summaries and one small
sample per scrape are kept, so memory does not grow with the page size or the window. Every value is validated:
NaN, infinities, negative counts and JSON of the wrong type are left out with an "ignored" note, never a crash.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from kvplan import validate
from kvplan.diagnose import http
from kvplan.diagnose.prom import PageSummary, parse_prometheus
from kvplan.engines.results import MetricNames
from kvplan.errors import KvplanError
from kvplan.logs.serving import Sample

TIMEOUT_S = http.DEADLINE_S  # one deadline per request: connect + headers + body
MAX_SCRAPE_BYTES = 16 << 20  # per /metrics page; past it the page is truncated (and said so)
MAX_JSON_BYTES = 4 << 20
MAX_SCRAPES = 600
MAX_NOTES = 20
__all__ = ["parse_prometheus", "scrape", "ServerView", "observed_avg_request", "page_sample", "Scrape"]


def _tables() -> list[MetricNames]:
    from kvplan.engines import all_engines

    return [e.metrics for e in all_engines() if e.metrics]


def _wanted(tables: list[MetricNames]) -> tuple[frozenset[str], frozenset[str], tuple[bytes, ...]]:
    """(the metric names kvplan reads, the info metrics whose labels it keeps, the engines' name prefixes)."""
    names: set[str] = set()
    labelled = {n.config_info for n in tables if n.config_info}
    for n in tables:
        for f in fields(n):
            v = getattr(n, f.name)
            if isinstance(v, tuple):
                names.update(v)
        names.update(n.histogram(w) + s for w, s in (("prompt", "_count"), ("prompt", "_sum"), ("generation", "_sum")))
    return frozenset(names | labelled), frozenset(labelled), tuple(n.prefix.encode() for n in tables)


@dataclass
class Scrape:
    t: float
    page: PageSummary


@dataclass
class ServerView:
    """What the endpoints said, beyond the samples."""

    engine: str | None = None  # the registry name of the engine that answered
    url: str = ""
    server_info: dict[str, Any] = field(default_factory=dict)  # SGLang /get_server_info (a JSON object)
    cache_config: dict[str, str] = field(default_factory=dict)  # vLLM cache_config_info labels
    models: list[dict[str, Any]] = field(default_factory=list)  # vLLM /v1/models data
    n_scrapes: int = 0
    last_totals: dict[str, float] = field(default_factory=dict)  # the latest total of every name seen
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    ignored: int = 0  # samples left out (NaN, inf, negative)

    def last(self, *names: str) -> float | None:
        for n in names:
            if n in self.last_totals:
                return self.last_totals[n]
        return None

    def note(self, text: str) -> None:
        if len(self.errors) < MAX_NOTES and text not in self.errors:
            self.errors.append(text)


Getter = Callable[..., http.Response]  # http.get's signature
Progress = Callable[[float, float], None]  # (seconds sampled, window seconds)


def _why(e: BaseException) -> str:
    if isinstance(e, http.HttpError):
        return str(e)
    if isinstance(e, TimeoutError):
        return f"no complete answer within {TIMEOUT_S:g} s"
    why = getattr(e, "strerror", None)
    return type(e).__name__ + (f" ({why})" if why else "")


def _get_json(base: str, paths: tuple[str, ...], view: ServerView, get: Getter, until: float,
              clock: Callable[[], float]) -> Any:
    for p in paths:
        parts: list[bytes] = []
        left = until - clock()
        if left <= 0:
            view.note(f"GET {p}: skipped (the {TIMEOUT_S:g} s for the server's info are over)")
            continue
        try:
            resp = get(base + p, parts.append, min(TIMEOUT_S, left), MAX_JSON_BYTES)
            for n in resp.notes:
                view.note(f"GET {p}: {n}")
            if resp.truncated:
                view.note(f"GET {p}: more than {MAX_JSON_BYTES >> 20} MiB: ignored")
                continue
            return validate.json_value(b"".join(parts).decode("utf-8", "replace"), f"GET {p}")
        except (http.HttpError, OSError) as e:
            view.note(f"GET {p}: {_why(e)}")
        except KvplanError as e:
            view.note(f"{e}: ignored")
    return None


def _count(view: ServerView, what: str, v: float | None, hi: float = 2.0**31) -> float | None:
    """A server figure as used: finite, >= 0, below *hi*; else None and an "ignored" note."""
    if v is None:
        return None
    if not math.isfinite(v) or not 0 <= v <= hi:
        view.ignored += 1
        view.note(f"ignored sample: {what} = {v!r}")
        return None
    return v


def _metric_names(view: ServerView) -> MetricNames | None:
    from kvplan.engines import get_engine

    return get_engine(view.engine).metrics if view.engine else None


def page_sample(view: ServerView, prev: Scrape | None, cur: Scrape) -> Sample:
    """The Sample of one scrape (gauges of ``cur``; rates from the counters' growth since ``prev``): every source
    of pages (``scrape`` here, the fleet's Prometheus steps) makes its samples with this one function."""
    s, eng = cur.page, view.engine
    out = Sample(kind="metrics", fmt=f"{eng}-metrics", t=cur.t, source=view.url)
    n = _metric_names(view)
    if n is None:
        return out
    run = _count(view, "running requests", s.total(*n.running))
    que = _count(view, "queued requests", s.total(*n.waiting))
    out.running = None if run is None else int(run)
    out.queued = None if que is None else int(que)
    out.usage = _count(view, "KV usage", s.peak(*n.usage), hi=1.5)
    used = _count(view, "KV tokens in use", s.total(*n.used_tokens), hi=2.0**40)
    out.tokens = None if used is None else int(used)
    host_used, host_total = s.total(*n.host_used_tokens), s.total(*n.host_total_tokens)
    if host_used is not None and host_total:
        out.host_usage = _count(view, "host KV usage", host_used / host_total, hi=1.5)
    out.accept_len = _count(view, "accept length", s.peak(*n.accept_length), hi=1e3)
    # gauge: the last logging interval (a counter below replaces it)
    out.gen_tps = _count(view, "gen throughput", s.total(*n.gen_throughput), hi=1e12)
    if prev is None or cur.t <= prev.t:
        return out
    dt = cur.t - prev.t

    def delta(*names: str) -> float | None:
        a, b = prev.page.total(*names), cur.page.total(*names)
        return None if a is None or b is None else max(0.0, b - a)

    gen, prompt = delta(*n.generation_tokens), delta(*n.prompt_tokens)
    if gen is not None:
        out.gen_tps = _count(view, "generation tokens/s", gen / dt, hi=1e12)
    if prompt is not None:
        out.prompt_tps = _count(view, "prompt tokens/s", prompt / dt, hi=1e12)
    pre = delta(*n.preemptions)
    out.preemptions = None if pre is None else int(min(pre, 2.0**31))
    q, h = delta(*n.prefix_queries), delta(*n.prefix_hits)
    if q and h is not None:
        out.prefix_hit = min(1.0, h / q)
    eq, eh = delta(*n.external_queries), delta(*n.external_hits)
    if eq and eh is not None:
        out.external_hit = min(1.0, eh / eq)
    cached = delta(*n.cached_tokens)
    if cached is not None and prompt:
        out.prefix_hit = min(1.0, cached / prompt)
    ret = _count(view, "retracted requests", s.total(*n.retracted))  # a gauge, read from the second scrape on
    out.retracted = None if ret is None else int(ret)
    return out


def _scrape_once(base: str, view: ServerView, get: Getter, wanted: tuple[frozenset[str], frozenset[str],
                 tuple[bytes, ...]], deadline_s: float = TIMEOUT_S) -> PageSummary:
    page = PageSummary(*wanted)
    resp = get(base + "/metrics", page.feed, deadline_s, MAX_SCRAPE_BYTES, True)
    page.close()
    for n in resp.notes:
        view.note(f"GET /metrics: {n}")
    if resp.timed_out:
        view.note(f"GET /metrics: page truncated at the {TIMEOUT_S:g} s deadline after {resp.bytes_read >> 20} MiB "
                  "(the rest was not read)")
    elif resp.truncated:
        view.note(f"GET /metrics: page truncated at {MAX_SCRAPE_BYTES >> 20} MiB (the rest was not read)")
    if page.ignored:
        view.ignored += page.ignored
        view.note(f"ignored sample(s) in /metrics (not a finite number >= 0): {', '.join(page.ignored_examples)}")
    if page.skipped_lines:
        view.note(f"GET /metrics: {page.skipped_lines} over-long line(s) skipped")
    return page


def scrape(url: str, window_s: float = 30.0, interval_s: float | None = None, get: Getter = http.get,
           sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
           progress: Progress | None = None, stop_by: float | None = None) -> ServerView:
    """Sample the server at ``url`` for ``window_s`` seconds (at least two scrapes, at most MAX_SCRAPES);
    ``progress(elapsed_s, window_s)`` after each scrape (a progress bar; its errors are ignored).

    Time bound, whatever the server does: the info endpoints share one TIMEOUT_S; the scrapes end by
    window + TIMEOUT_S after they start (each request also within TIMEOUT_S): at most window + 2 × TIMEOUT_S; and by
    *stop_by* (a ``clock()`` time) when given: the caller's own bound (diagnose: what is left for planning)."""
    from kvplan.engines import all_engines

    engines = all_engines()
    wanted = _wanted([e.metrics for e in engines if e.metrics])
    base = url.rstrip("/")
    view = ServerView(url=base)
    info_until = clock() + TIMEOUT_S if stop_by is None else min(clock() + TIMEOUT_S, stop_by)
    for eng in engines:
        if not eng.info_paths:
            continue
        info = _get_json(base, eng.info_paths, view, get, info_until, clock)
        if isinstance(info, dict):
            view.engine, view.server_info = eng.name, info
            break
        if info is not None:
            view.note(f"GET {eng.info_paths[0]}: not a JSON object: ignored")
    models = _get_json(base, ("/v1/models",), view, get, info_until, clock)
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        view.models = [m for m in models["data"] if isinstance(m, dict)][:64]
    elif models is not None:
        view.note("GET /v1/models: not an object with a data list: ignored")
    window_s = max(0.0, float(window_s))
    step = interval_s or max(0.5, min(2.0, window_s / 5 or 0.5))
    n = min(MAX_SCRAPES, max(2, int(window_s / step) + 1))
    t0, prev = clock(), None
    end = t0 + window_s + TIMEOUT_S if stop_by is None else min(t0 + window_s + TIMEOUT_S, stop_by)
    for i in range(n):
        if i and clock() >= end - 0.05:
            view.note(f"GET /metrics: stopped after {i} request(s): the window is over")
            break  # slow answers: the window bounds the whole diagnosis, not only each request
        if i:
            sleep(max(0.0, min(t0 + i * step, end) - clock()))
        try:
            page = _scrape_once(base, view, get, wanted, max(0.05, min(TIMEOUT_S, end - clock())))
        except (http.HttpError, OSError) as e:
            view.note(f"GET /metrics: {_why(e)}")
            if i == 0 and not view.engine and not view.models:
                break  # nothing answers: do not wait out the window
            continue
        cur = Scrape(clock(), page)
        view.n_scrapes += 1
        if view.engine is None:
            view.engine = next((eng.name for eng in engines if eng.metrics and eng.metrics.prefix in page.prefixes),
                               None)
        for eng in engines:
            info_metric = eng.metrics.config_info if eng.metrics else None
            if info_metric and info_metric in page.labels and not view.cache_config:
                view.cache_config = dict(page.labels[info_metric])
        if view.engine:
            view.samples.append(page_sample(view, prev, cur))
        view.last_totals.update({k: a.total for k, a in page.aggs.items()})
        prev = cur
        if progress is not None:
            try:
                progress(min(window_s, clock() - t0), window_s)
            except Exception:  # noqa: BLE001 - a display must not stop the sampling
                progress = None
    if view.engine is None and view.models:  # only OpenAI endpoints answered
        view.engine = next((eng.name for eng in engines if eng.bare_openai_server), None)
    return view


def observed_avg_request(view: ServerView) -> tuple[float | None, str]:
    """Average finished-request length (prompt + generation) from the servers' histograms, if any, else from the
    token and request counters."""
    tables = _tables()
    for n in tables:
        prompt, gen = n.histogram("prompt"), n.histogram("generation")
        pc, ps, gs = view.last(prompt + "_count"), view.last(prompt + "_sum"), view.last(gen + "_sum")
        if pc and ps is not None and gs is not None:
            return (ps + gs) / pc, f"{int(pc)} finished requests ({n.prefix}request_prompt/generation_tokens)"
    for n in tables:
        if not n.requests:
            continue
        pt, gt, nr = view.last(*n.prompt_tokens), view.last(*n.generation_tokens), view.last(*n.requests)
        if nr and pt is not None and gt is not None:
            return (pt + gt) / nr, f"{int(nr)} requests ({n.prefix}prompt/generation_tokens_total)"
    return None, ""
