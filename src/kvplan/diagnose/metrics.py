"""Read a live SGLang or vLLM server over HTTP (urllib only), over a window, tolerant of missing metrics.

Endpoints (references: sglang-memory.md §4, vllm-lmcache-memory.md §5): Prometheus ``/metrics`` (SGLang needs
``--enable-metrics``), SGLang ``/get_server_info`` (``/server_info`` in newer versions), vLLM ``/v1/models``
(``max_model_len``, ``root``) and the ``vllm:cache_config_info`` labels. Gauges are read at every scrape; rates
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

from kvplan.diagnose.stats import Sample

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

    engine: str | None = None  # sglang | vllm
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
        return r.read(16 * 2**20).decode("utf-8", "replace")


def _get_json(base: str, paths: tuple[str, ...], view: ServerView, get: Callable[[str], str]) -> Any:
    for p in paths:
        try:
            return json.loads(get(base + p))
        except (urllib.error.URLError, OSError, ValueError) as e:
            view.errors.append(f"GET {p}: {getattr(e, 'code', '') or type(e).__name__}")
    return None


def _sample(view: ServerView, prev: Scrape | None, cur: Scrape) -> Sample:
    s, eng = cur.series, view.engine
    out = Sample(kind="metrics", fmt=f"{eng}-metrics", t=cur.t, source=view.url)
    p = "vllm:" if eng == "vllm" else "sglang:"
    run = _total(s, p + "num_requests_running", p + "num_running_reqs")
    que = _total(s, p + "num_requests_waiting", p + "num_queue_reqs")
    out.running = None if run is None else int(run)
    out.queued = None if que is None else int(que)
    out.usage = _peak(s, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
    used = _total(s, "sglang:num_used_tokens")
    out.tokens = None if used is None else int(used)
    host_used, host_total = _total(s, "sglang:hicache_host_used_tokens"), _total(s, "sglang:hicache_host_total_tokens")
    if host_used is not None and host_total:
        out.host_usage = host_used / host_total
    out.accept_len = _peak(s, "sglang:spec_accept_length")
    if eng == "sglang":
        out.gen_tps = _total(s, "sglang:gen_throughput")  # gauge: last decode-log interval
    if prev is None or cur.t <= prev.t:
        return out
    dt = cur.t - prev.t

    def delta(*names: str) -> float | None:
        a, b = _total(prev.series, *names), _total(cur.series, *names)
        return None if a is None or b is None else max(0.0, b - a)

    gen, prompt = delta(p + "generation_tokens_total"), delta(p + "prompt_tokens_total")
    if gen is not None:
        out.gen_tps = gen / dt
    if prompt is not None:
        out.prompt_tps = prompt / dt
    pre = delta("vllm:num_preemptions_total")
    out.preemptions = None if pre is None else int(pre)
    q, h = delta("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"), \
        delta("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
    if q and h is not None:
        out.prefix_hit = h / q
    eq, eh = delta("vllm:external_prefix_cache_queries_total"), delta("vllm:external_prefix_cache_hits_total")
    if eq and eh is not None:
        out.external_hit = eh / eq
    if eng == "sglang":
        cached = delta("sglang:cached_tokens_total")
        if cached is not None and prompt:
            out.prefix_hit = min(1.0, cached / prompt)
        ret = _total(cur.series, "sglang:num_retracted_reqs")
        out.retracted = None if ret is None else int(ret)
    return out


def scrape(url: str, window_s: float = 30.0, interval_s: float | None = None,
           get: Callable[[str], str] = fetch, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> ServerView:
    """Sample the server at ``url`` for ``window_s`` seconds (at least two scrapes, bounded in number)."""
    base = url.rstrip("/")
    view = ServerView(url=base)
    info = _get_json(base, ("/get_server_info", "/server_info"), view, get)
    if isinstance(info, dict):
        view.engine, view.server_info = "sglang", info
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
            view.engine = "vllm" if "vllm:" in names else "sglang" if "sglang:" in names else None
        if "vllm:cache_config_info" in series and not view.cache_config:
            view.cache_config = dict(series["vllm:cache_config_info"][0][0])
        if view.engine:
            view.samples.append(_sample(view, prev, cur))
        view.scrapes.append(cur)
        prev = cur
    if view.engine is None and view.models:
        view.engine = "vllm"
    return view


def observed_avg_request(view: ServerView) -> tuple[float | None, str]:
    """Average finished-request length (prompt + generation) from the servers' histograms, if any."""
    for p in ("vllm:", "sglang:"):
        pc, ps = view.last(p + "request_prompt_tokens_count"), view.last(p + "request_prompt_tokens_sum")
        gs = view.last(p + "request_generation_tokens_sum")
        if pc and ps is not None and gs is not None:
            return (ps + gs) / pc, f"{int(pc)} finished requests ({p}request_prompt/generation_tokens)"
    pt, gt, nr = view.last("sglang:prompt_tokens_total"), view.last("sglang:generation_tokens_total"), \
        view.last("sglang:num_requests_total")
    if nr and pt is not None and gt is not None:
        return (pt + gt) / nr, f"{int(nr)} requests (sglang:prompt/generation_tokens_total)"
    return None, ""
