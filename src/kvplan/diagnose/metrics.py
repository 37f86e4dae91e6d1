"""Read a live server over HTTP (urllib only), over a window, tolerant of missing metrics.

Endpoints: Prometheus ``/metrics`` (names per engine: ``Engine.metrics``), the engine's own info endpoints
(``Engine.info_paths``, e.g. SGLang ``/get_server_info``), OpenAI ``/v1/models`` (``max_model_len``, ``root``) and
an engine's config-info metric (vLLM ``cache_config_info`` labels). Gauges are read at every scrape; rates
(generation/prompt tokens per second, preemptions, prefix hits) come from counter differences between scrapes.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvplan.engines.results import MetricNames
from kvplan.logs.serving import Sample

_LINE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
TIMEOUT_S = 5.0
Series = dict[str, list[tuple[dict[str, str], float]]]


def parse_prometheus(text: str) -> Series:
    """name -> [(labels, value)] of a Prometheus text page (comments and bad lines skipped)."""
    out: Series = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _LINE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out.setdefault(m.group(1), []).append((dict(_LABEL.findall(m.group(2) or "")), value))
    return out


def _total(s: Series, *names: str) -> float | None:
    """Sum over label sets of the first metric name present (DP ranks / engines add up)."""
    for n in names:
        if n in s:
            return sum(v for _, v in s[n])
    return None


def _peak(s: Series, *names: str) -> float | None:
    for n in names:
        if n in s:
            return max(v for _, v in s[n])
    return None


@dataclass
class Scrape:
    t: float
    series: Series


@dataclass
class ServerView:
    """What the endpoints said, beyond the samples."""

    engine: str | None = None  # the registry name of the engine that answered
    url: str = ""
    server_info: dict[str, Any] = field(default_factory=dict)  # SGLang /get_server_info
    cache_config: dict[str, str] = field(default_factory=dict)  # vLLM cache_config_info labels
    models: list[dict[str, Any]] = field(default_factory=list)  # vLLM /v1/models data
    scrapes: list[Scrape] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def last(self, *names: str) -> float | None:
        for sc in reversed(self.scrapes):
            v = _total(sc.series, *names)
            if v is not None:
                return v
        return None


def fetch(url: str, timeout: float = TIMEOUT_S) -> str:
    req = urllib.request.Request(url, headers={"User-Agent": "kvplan-diagnose"})
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - the user's own server URL
        data: bytes = r.read(16 * 2**20)
        return data.decode("utf-8", "replace")


def _get_json(base: str, paths: tuple[str, ...], view: ServerView, get: Callable[[str], str]) -> Any:
    for p in paths:
        try:
            return json.loads(get(base + p))
        except (urllib.error.URLError, OSError, ValueError) as e:
            view.errors.append(f"GET {p}: {getattr(e, 'code', '') or type(e).__name__}")
    return None


def _names(view: ServerView) -> MetricNames | None:
    from kvplan.engines import get_engine

    return get_engine(view.engine).metrics if view.engine else None


def _sample(view: ServerView, prev: Scrape | None, cur: Scrape) -> Sample:
    s, eng = cur.series, view.engine
    out = Sample(kind="metrics", fmt=f"{eng}-metrics", t=cur.t, source=view.url)
    n = _names(view)
    if n is None:
        return out
    run, que = _total(s, *n.running), _total(s, *n.waiting)
    out.running = None if run is None else int(run)
    out.queued = None if que is None else int(que)
    out.usage = _peak(s, *n.usage)
    used = _total(s, *n.used_tokens)
    out.tokens = None if used is None else int(used)
    host_used, host_total = _total(s, *n.host_used_tokens), _total(s, *n.host_total_tokens)
    if host_used is not None and host_total:
        out.host_usage = host_used / host_total
    out.accept_len = _peak(s, *n.accept_length)
    out.gen_tps = _total(s, *n.gen_throughput)  # gauge: last logging interval (a counter below replaces it)
    if prev is None or cur.t <= prev.t:
        return out
    dt = cur.t - prev.t

    def delta(*names: str) -> float | None:
        a, b = _total(prev.series, *names), _total(cur.series, *names)
        return None if a is None or b is None else max(0.0, b - a)

    gen, prompt = delta(*n.generation_tokens), delta(*n.prompt_tokens)
    if gen is not None:
        out.gen_tps = gen / dt
    if prompt is not None:
        out.prompt_tps = prompt / dt
    pre = delta(*n.preemptions)
    out.preemptions = None if pre is None else int(pre)
    q, h = delta(*n.prefix_queries), delta(*n.prefix_hits)
    if q and h is not None:
        out.prefix_hit = h / q
    eq, eh = delta(*n.external_queries), delta(*n.external_hits)
    if eq and eh is not None:
        out.external_hit = eh / eq
    cached = delta(*n.cached_tokens)
    if cached is not None and prompt:
        out.prefix_hit = min(1.0, cached / prompt)
    ret = _total(cur.series, *n.retracted)  # a gauge, read from the second scrape on
    out.retracted = None if ret is None else int(ret)
    return out


def scrape(url: str, window_s: float = 30.0, interval_s: float | None = None,
           get: Callable[[str], str] = fetch, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> ServerView:
    """Sample the server at ``url`` for ``window_s`` seconds (at least two scrapes, bounded in number)."""
    from kvplan.engines import all_engines

    engines = all_engines()
    base = url.rstrip("/")
    view = ServerView(url=base)
    for eng in engines:
        info = _get_json(base, eng.info_paths, view, get) if eng.info_paths else None
        if isinstance(info, dict):
            view.engine, view.server_info = eng.name, info
            break
    models = _get_json(base, ("/v1/models",), view, get)
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        view.models = [m for m in models["data"] if isinstance(m, dict)]
    window_s = max(0.0, float(window_s))
    step = interval_s or max(0.5, min(2.0, window_s / 5 or 0.5))
    n = min(600, max(2, int(window_s / step) + 1))
    t0, prev = clock(), None
    for i in range(n):
        if i:
            sleep(max(0.0, t0 + i * step - clock()))
        try:
            series = parse_prometheus(get(base + "/metrics"))
        except (urllib.error.URLError, OSError, ValueError) as e:
            view.errors.append(f"GET /metrics: {getattr(e, 'code', '') or type(e).__name__}")
            if i == 0 and not view.engine and not view.models:
                break  # nothing answers: do not wait out the window
            continue
        cur = Scrape(clock(), series)
        if view.engine is None:
            names = " ".join(series)
            view.engine = next((eng.name for eng in engines if eng.metrics and eng.metrics.prefix in names), None)
        for eng in engines:
            info_metric = eng.metrics.config_info if eng.metrics else None
            if info_metric and info_metric in series and not view.cache_config:
                view.cache_config = dict(series[info_metric][0][0])
        if view.engine:
            view.samples.append(_sample(view, prev, cur))
        view.scrapes.append(cur)
        prev = cur
    if view.engine is None and view.models:  # only OpenAI endpoints answered
        view.engine = next((eng.name for eng in engines if eng.bare_openai_server), None)
    return view


def observed_avg_request(view: ServerView) -> tuple[float | None, str]:
    """Average finished-request length (prompt + generation) from the servers' histograms, if any, else from the
    token and request counters."""
    from kvplan.engines import all_engines

    tables = [e.metrics for e in all_engines() if e.metrics]
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
