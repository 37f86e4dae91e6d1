"""``kvplan diagnose --prometheus URL``: every replica a Prometheus server scrapes, diagnosed like ``--url``.

Four requests whatever the fleet's size (``query``): the engine series over the window (discovery, grouped per
replica), the scrape times, the values summed and the values peaked over each replica's label sets. Each replica's
steps become the Samples ``--url`` makes (``read``), its window is built by ``window.build`` and judged by
``run.judge`` (the same rules and lever pricing), its launch taken from the files given (``launches``) or from
what its metrics say (``Engine.metrics_facts``). Then the fleet (``summary``): replicas per bottleneck and per
deployment, and the levers that help most across the replicas with a launch bottleneck.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kvplan.diagnose.fleet.discover import MAX_SERIES, Discovery, Replica
from kvplan.diagnose.fleet.launches import Launches
from kvplan.diagnose.fleet.query import names, scrapes_query, selector, series_match, values_query
from kvplan.diagnose.fleet.read import Grid, Reader, grid
from kvplan.diagnose.metrics import ServerView
from kvplan.errors import KvplanError

WINDOW_S = 300.0  # a dashboard's "last 5 minutes": enough scrapes at the usual 15-30 s interval
SCHEMA_VERSION = 1


@dataclass
class FleetResult:
    prometheus: str
    match: str
    window_s: float
    grid: Grid
    replicas: list[dict[str, Any]] = field(default_factory=list)
    fleet: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        g = self.grid
        return {"schema_version": SCHEMA_VERSION, "prometheus": self.prometheus, "match": self.match,
                "window_s": self.window_s, "start": g.start, "end": g.end, "step_s": g.step,
                "replicas": self.replicas, "fleet": self.fleet, "notes": self.notes}


def diagnose_fleet(url: str, match: str | None = None, window_s: float | None = None,
                   files: list[str] | None = None, env: Mapping[str, str] | None = None,
                   get: Callable[..., Any] | None = None, now: Callable[[], float] = time.time,
                   **options: Any) -> FleetResult:
    """Diagnose every replica Prometheus at ``url`` holds (``match``: label matchers) over the last ``window_s``
    seconds; ``files``: deployment files whose launches the replicas run; ``options``: check's hardware options
    for every replica. A server that gives no answer, or no engine series, is a one-line KvplanError."""
    t0, c0 = time.monotonic(), time.process_time()
    from kvplan import validate
    from kvplan.diagnose.promapi import Prometheus

    window_s = validate.seconds("--window", window_s if window_s is not None else WINDOW_S, positive=True,
                                hint="e.g. --window 300")
    options = validate.plan_options(options)
    sel = selector(match)
    launches = None
    if files:
        from kvplan.diagnose.fleet.launches import read

        launches = read(files)  # an unreadable file fails before any request
    prom = Prometheus(url, env=os.environ if env is None else env)
    if get is not None:
        prom.get = get
    n = names()
    end = round(now(), 3)
    disc = Discovery(n)
    prom.series(series_match(n, sel), end - window_s, end, disc.feed, limit=MAX_SERIES)
    reps = disc.done()
    if not reps:
        from kvplan.engines import all_engines

        which = " or ".join(e.display_name for e in all_engines() if e.metrics)
        raise KvplanError(f"{prom.url}: no {which} series over the last {window_s:g} s" +
                          (f" matching {{{sel}}}" if sel else ""),
                          "check --match and --window, that Prometheus scrapes the servers' /metrics (SGLang needs "
                          "--enable-metrics)")
    g = grid(end, window_s, sum(len(r.names - n.last_only) + 1 for r in reps))
    reader = Reader(n, g, {r.key: r for r in reps})
    prom.query_range(scrapes_query(n, sel), g.start, g.end, g.step, reader.on_scrapes)
    present = set().union(*(r.names for r in reps))
    for agg, wanted in (("sum", present & set(n.summed)), ("max", present & set(n.peaked))):
        if wanted:
            prom.query_range(values_query(agg, wanted, sel), g.start, g.end, g.step, reader.on_values)
    res = FleetResult(prom.url, sel, window_s, g, notes=[*prom.notes, *disc.notes])
    if disc.ignored or reader.stray:
        res.notes.append(f"left out: {disc.ignored + reader.stray} series of the answers (no engine name, no "
                         "replica, or not a label set / series)")
    for rep in reps:
        res.replicas.append(judge_replica(rep, reader.view(rep), launches, options, res))
    if launches is not None:
        res.notes.extend(launches.notes)
    from kvplan.diagnose.fleet.summary import summarize

    res.fleet = summarize(res.replicas)
    res.fleet.update(requests=prom.requests, bytes_read=prom.bytes_read, series=disc.series,
                     prometheus_s=round(prom.seconds, 3),
                     elapsed_s=round(time.monotonic() - t0, 3), cpu_s=round(time.process_time() - c0, 3),
                     process_cpu_s=round(time.process_time(), 3))
    return res


def judge_replica(rep: Replica, view: ServerView, launches: Launches | None, options: dict[str, Any],
                  res: FleetResult) -> dict[str, Any]:
    """One replica judged as ``--url`` judges a server: its JSON (``diagnose --url``'s keys but ``series``, and
    the replica's labels, deployment and where its launch came from)."""
    from kvplan.diagnose.run import judge
    from kvplan.diagnose.window import build
    from kvplan.engines import get_engine

    engine = rep.engine
    eng = get_engine(engine) if engine else None
    ignored: list[str] = []
    srv = None
    if eng is not None and eng.metrics is not None:
        pool = view.last(*eng.metrics.pool_tokens) if eng.metrics.pool_tokens else None
        srv = eng.metrics_facts(view.cache_config, rep.model, pool, ignored)
    for note in ignored:
        view.ignored += 1
        view.note(note)
    launch = launches.match(rep, options) if launches is not None else None
    w = build(view.samples, engine)
    view.samples = []  # the window holds them now; dropped with it once judged
    out = judge(engine, w, None, srv, view, list(launch.argv) if launch else None,
                launch.options if launch else options, [*(launch.notes if launch else ()), *view.errors],
                {"prometheus": res.prometheus, "instance": rep.instance, "window_s": res.window_s,
                 "facts_from": "the metrics in Prometheus"})
    d = out.to_dict()
    for k in ("schema_version", "series"):
        d.pop(k, None)
    lab = rep.labels
    if len(rep.models) > 1:
        d["notes"].append(f"series of {len(rep.models)} models: {', '.join(rep.models)}; read as one server")
    return {"instance": rep.instance, "pod": lab.get("pod"), "namespace": lab.get("namespace"),
            "job": lab.get("job"), "model": rep.model, "deployment": {"job": lab.get("job"), "model": rep.model},
            "launch_source": launch.source if launch else "the metrics (model label, config-info labels)",
            "step_s": res.grid.step, **d}
