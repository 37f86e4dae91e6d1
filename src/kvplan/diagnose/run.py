"""``kvplan diagnose``: read a running server (log and/or URL) over a window, name its bottleneck with the
evidence that decided it, and price the levers with the same engine model as ``kvplan check``.

Sources: the log gives serving-stats lines (window = its last S seconds) and its startup facts (the pool the engine
reported, the free-memory baseline, the launch flags); the URL gives /metrics samples over S seconds and the
server's own info. With both, the URL's samples make the window and the log adds the startup facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvplan.diagnose.levers import Lever, Pricing, price
from kvplan.diagnose.metrics import TIMEOUT_S, Progress, ServerView, observed_avg_request, scrape
from kvplan.diagnose.rules import RuleContext, Verdict, classify
from kvplan.diagnose.series import window_series
from kvplan.diagnose.stats import Sample, parse_samples
from kvplan.diagnose.window import Window, build, in_flight_tokens
from kvplan.engines.cmdline import tokenize
from kvplan.errors import KvplanError
from kvplan.logs.facts import LogFacts

URL_WINDOW_S, LOG_WINDOW_S = 30.0, 600.0
RESERVE_S = 1.5  # of diagnose --url's bound (window + 10 s), kept for planning the levers and printing
SCHEMA_VERSION = 1


@dataclass
class DiagnoseResult:
    engine: str | None
    engine_version: str | None
    window: Window
    verdicts: list[Verdict]
    levers: list[Lever] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    command_source: str | None = None
    sources: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def bottleneck(self) -> str:
        return self.verdicts[0].id if self.verdicts else "unknown"

    def lever(self, name: str) -> Lever | None:
        return next((lv for lv in self.levers if lv.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        v = self.verdicts[0]
        return {"schema_version": SCHEMA_VERSION, "engine": self.engine, "engine_version": self.engine_version,
                "bottleneck": v.id, "cause": v.cause, "fix": v.fix, "evidence": list(v.evidence),
                "secondary": [{"id": s.id, "cause": s.cause, "evidence": list(s.evidence)} for s in self.verdicts[1:]],
                "observed": self.observed, "levers": [lv.to_dict() for lv in self.levers],
                "command": self.command, "command_source": self.command_source, "sources": self.sources,
                "notes": self.notes, "series": window_series(self.window)}


def _log_inputs(path: str) -> tuple[list[Sample], LogFacts | None]:
    from kvplan.explain import parse_log
    from kvplan.logs.reader import iter_lines, open_log

    open_log(path)  # a missing, unreadable, non-regular, empty or binary file is an error (exit 2), not 0 samples
    samples = parse_samples(iter_lines(path))
    try:
        facts = parse_log(path)
    except KvplanError:
        facts = None  # a pasted excerpt of serving lines only
    return samples, facts


def _pool_from_serving(engine: str | None, w: Window) -> tuple[int, str] | None:
    from kvplan.engines import ENGINES, get_engine

    return get_engine(engine).serving_dialect().pool_tokens(w.samples) if engine in ENGINES else None


def _engine_of(samples: list[Sample], facts: LogFacts | None, view: ServerView | None,
               cmd: Sequence[str] | None) -> str | None:
    if facts is not None and facts.engine:
        return facts.engine
    if view is not None and view.engine:
        return view.engine
    fmts = {s.engine for s in samples if s.fmt}
    if len(fmts) == 1:
        return fmts.pop()
    if cmd:
        from kvplan.engines import detect_engine, split_command

        try:
            return detect_engine(split_command(list(cmd))).name
        except KvplanError:
            return None
    return None


def server_facts(view: ServerView) -> LogFacts | None:
    """LogFacts equivalent of what the endpoints said (so the launch can be rebuilt the same way). The engine checks
    every value for its type and range; what does not fit is left out with a note."""
    from kvplan.engines import get_engine

    if not view.engine:
        return None
    ignored: list[str] = []
    facts = get_engine(view.engine).server_facts(view.server_info, view.cache_config, view.models, ignored)
    for note in ignored:
        view.ignored += 1
        view.note(note)
    return facts


def diagnose(url: str | None = None, log: str | None = None, window_s: float | None = None,
             launch_command: Sequence[str] | str | None = None, progress: Progress | None = None,
             started_at: float | None = None, **options: Any) -> DiagnoseResult:
    """Diagnose a server from its log, its URL, or both. ``options``: the hardware options of ``check``;
    ``progress(elapsed_s, window_s)`` is called while the URL is sampled. A URL that answers as no engine at all is a
    KvplanError (connection refused, timeout, HTTP status, not an engine).

    Time bound with a URL, whatever the server does: ``window + 2 × TIMEOUT_S`` from *started_at* (the CLI's start;
    default: this call), the time spent reading the log aside. The sampling stops ``RESERVE_S`` before that bound
    (and earlier by the start-up before this call), so that planning and printing fit in it too."""
    import time

    entered = time.monotonic()
    lead = max(0.0, entered - started_at) if started_at is not None else 0.0
    if not url and not log:
        raise KvplanError("nothing to read", "give --log FILE and/or --url http://HOST:PORT")
    from kvplan import validate

    if window_s is not None:
        window_s = validate.seconds("--window", window_s, positive=True, hint="e.g. --window 30")
    options = validate.plan_options(options)
    user_cmd = tokenize(launch_command) if isinstance(launch_command, str) else launch_command
    log_samples, facts = _log_inputs(log) if log else ([], None)
    stop_by = time.monotonic() + (window_s or URL_WINDOW_S) + 2 * TIMEOUT_S - RESERVE_S - lead
    view = scrape(url, window_s or URL_WINDOW_S, progress=progress, stop_by=stop_by) if url else None
    if view is not None:
        from kvplan.diagnose.reach import unreachable

        down = unreachable(view)
        if down is not None:
            raise KvplanError(down, "check the URL and that the server runs (SGLang needs --enable-metrics)")
    engine = _engine_of(log_samples, facts, view, user_cmd)
    srv = server_facts(view) if view is not None else None
    notes: list[str] = []
    if view is not None:
        notes.extend(f"{url}: {e}" for e in view.errors[:20])
    live = [s for s in (view.samples if view else []) if s.kind == "metrics"]
    if live:
        w = build(live, engine)
        w.preemptions += sum(s.preemptions or 0 for s in log_samples[-50:] if s.kind == "preempt") if log else 0
    else:
        w = build(log_samples, engine, window_s or LOG_WINDOW_S)
    sources = {"url": url, "log": log, "window_s": window_s or (URL_WINDOW_S if live else
                                                              LOG_WINDOW_S if log else None)}
    return judge(engine, w, facts, srv, view, user_cmd, options, notes, sources)


def judge(engine: str | None, w: Window, facts: LogFacts | None, srv: LogFacts | None, view: ServerView | None,
          user_cmd: Sequence[str] | None, options: dict[str, Any], notes: list[str],
          sources: dict[str, Any]) -> DiagnoseResult:
    """The window judged: the launch planned (``context``), the bottleneck named (``rules``), the levers priced
    (``levers``). ``--url``, ``--log`` and every replica of ``--prometheus`` end here, so each is judged alike."""
    from kvplan.diagnose.context import plan_context

    ctx = plan_context(engine, facts, srv, user_cmd, options, sources.get("url"),
                       sources.get("facts_from", "the server's info"))
    read = _pool_from_serving(engine, w)
    if ctx.observed_tokens is None and read is not None:
        ctx.observed_tokens, ctx.pool_source = read
        ctx.notes = [n for n in ctx.notes if "did not report its KV pool" not in n]
    pool_group = ctx.observed_tokens
    groups = ctx.plan.per_replica.dp_groups if ctx.plan is not None else 1
    pool = pool_group * groups if pool_group is not None else (
        ctx.plan.per_replica.kv_tokens if ctx.plan is not None else None)
    avg, avg_src = (float(options["avg_tokens"]), "--avg-tokens") if options.get("avg_tokens") else \
        in_flight_tokens(w, pool)
    if avg is None and view is not None:
        avg, avg_src = observed_avg_request(view)
    rc = RuleContext(w, engine, pool, ctx.pool_scope, ctx.max_running)
    verdicts = classify(rc)
    res = DiagnoseResult(engine, ctx.version, w, verdicts, command=ctx.command_text,
                         command_source=ctx.command_source, notes=notes + ctx.notes, sources=sources)
    res.observed = {"samples": w.n, "span_s": w.span_s, "running": w.running, "queued": w.queued,
                    "kv_usage": w.usage, "kv_usage_min": w.usage_min, "kv_usage_max": w.usage_max,
                    "gen_tps": w.gen_tps, "prompt_tps": w.prompt_tps, "per_request_gen_tps": w.per_request_tps,
                    "preemptions": w.preemptions, "retractions": w.retractions, "prefix_hit": w.prefix_hit,
                    "host_kv_usage_max": w.host_usage_max, "pool_tokens": pool, "pool_scope": ctx.pool_scope,
                    "pool_source": ctx.pool_source, "avg_tokens": None if avg is None else round(avg, 1),
                    "avg_tokens_source": avg_src, "max_running": ctx.max_running}
    res.observed = {k: round(v, 3) if isinstance(v, float) else v for k, v in res.observed.items()}
    if ctx.running is not None:
        given = ctx.given or ctx.running
        base = given.repaired or given
        p = Pricing(base, ctx.host_known, ctx.graph_gib, running=ctx.running, given=given, window=w,
                    observed_tokens=pool_group, avg_tokens=avg, command_known=ctx.command_known,
                    max_running=ctx.max_running, bottleneck=res.bottleneck)
        res.levers, skipped = price(p)
        res.notes.extend(f"lever not priced: {s}" for s in skipped)
        from kvplan.diagnose.postprice import cap_by_step_time, no_launch_fixes

        res.notes.extend(cap_by_step_time(res.levers, w, ctx.plan))
        res.notes.extend(no_launch_fixes(res.levers, res.bottleneck))
    return res
