"""``kvplan diagnose``: read a running server (log and/or URL) over a window, name its bottleneck with the
evidence that decided it, and price the levers with the same engine model as ``kvplan check``.

Sources: the log gives serving-stats lines (window = its last S seconds) and its startup facts (the pool the engine
reported, the free-memory baseline, the launch flags); the URL gives /metrics samples over S seconds and the
server's own info. With both, the URL's samples make the window and the log adds the startup facts.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvplan.diagnose.levers import Lever, Pricing, price
from kvplan.diagnose.metrics import ServerView, observed_avg_request, scrape
from kvplan.diagnose.rules import RuleContext, Verdict, classify
from kvplan.diagnose.stats import Sample, parse_samples
from kvplan.diagnose.window import Window, build, in_flight_tokens, pool_from_lines
from kvplan.errors import KvplanError

URL_WINDOW_S, LOG_WINDOW_S = 30.0, 600.0
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
                "notes": self.notes}


def _log_inputs(path: str) -> tuple[list[Sample], Any]:
    from kvplan.explain import parse_log
    from kvplan.logs.reader import iter_lines, open_log

    open_log(path)  # a missing, unreadable, non-regular, empty or binary file is an error (exit 2), not 0 samples
    samples = parse_samples(iter_lines(path))
    try:
        facts = parse_log(path)
    except KvplanError:
        facts = None  # a pasted excerpt of serving lines only
    return samples, facts


def _engine_of(samples: list[Sample], facts: Any, view: ServerView | None, cmd: Sequence[str] | None) -> str | None:
    if facts is not None and facts.engine:
        return facts.engine
    if view is not None and view.engine:
        return view.engine
    fmts = {s.fmt.split("-")[0] for s in samples if s.fmt}
    if len(fmts) == 1:
        return fmts.pop()
    if cmd:
        from kvplan.engines import detect_engine, split_command

        try:
            return detect_engine(split_command(list(cmd))).name
        except KvplanError:
            return None
    return None


def _server_facts(view: ServerView) -> Any:
    """LogFacts equivalent of what the endpoints said (so the launch can be rebuilt the same way)."""
    from kvplan.logs.facts import LogFacts

    if view.engine == "sglang" and view.server_info:
        info = view.server_info
        args = {k: v for k, v in info.items() if not isinstance(v, (dict, list))}
        f = LogFacts(engine="sglang", args=args, model=info.get("model_path"), version=info.get("version"))
        sched = info.get("scheduler_info") or {}
        states = info.get("internal_states") or [{}]
        mem = states[0].get("memory_usage", {}) if isinstance(states[0], dict) else {}
        tokens = sched.get("max_total_num_tokens") or info.get("max_total_num_tokens") or mem.get("token_capacity")
        f.kv_tokens = int(tokens) if tokens else None
        mrr = states[0].get("effective_max_running_requests_per_dp") if isinstance(states[0], dict) else None
        f.max_running_requests = int(mrr) if mrr else None
        return f
    if view.engine == "vllm":
        cc, card = view.cache_config, (view.models[0] if view.models else {})
        args: dict[str, Any] = {"model": card.get("root") or card.get("id"), "max_model_len": card.get("max_model_len")}
        for label, key in (("block_size", "block_size"), ("gpu_memory_utilization", "gpu_memory_utilization"),
                           ("kv_cache_memory_bytes", "kv_cache_memory_bytes")):
            if cc.get(label) not in (None, "None", ""):
                args[key] = int(float(cc[label])) if key != "gpu_memory_utilization" else float(cc[label])
        if cc.get("cache_dtype") not in (None, "auto"):
            args["kv_cache_dtype"] = cc["cache_dtype"]
        f = LogFacts(engine="vllm", args={k: v for k, v in args.items() if v is not None}, model=args["model"])
        tokens = cc.get("kv_cache_size_tokens")
        f.kv_tokens = int(float(tokens)) if tokens not in (None, "None") else None
        return f
    return None


def diagnose(url: str | None = None, log: str | None = None, window_s: float | None = None,
             launch_command: Sequence[str] | str | None = None, **options: Any) -> DiagnoseResult:
    """Diagnose a server from its log, its URL, or both. ``options``: the hardware options of ``check``."""
    if not url and not log:
        raise KvplanError("nothing to read", "give --log FILE and/or --url http://HOST:PORT")
    from kvplan import validate

    if window_s is not None:
        window_s = validate.seconds("--window", window_s, positive=True, hint="e.g. --window 30")
    options = validate.plan_options(options)
    user_cmd = shlex.split(launch_command) if isinstance(launch_command, str) else launch_command
    log_samples, facts = _log_inputs(log) if log else ([], None)
    view = scrape(url, window_s or URL_WINDOW_S) if url else None
    engine = _engine_of(log_samples, facts, view, user_cmd)
    notes: list[str] = []
    if view is not None:
        notes.extend(f"{url}: {e}" for e in view.errors[:10])
    live = [s for s in (view.samples if view else []) if s.kind == "metrics"]
    if live:
        w = build(live, engine)
        w.preemptions += sum(s.preemptions or 0 for s in log_samples[-50:] if s.kind == "preempt") if log else 0
    else:
        w = build(log_samples, engine, window_s or LOG_WINDOW_S)
    srv = _server_facts(view) if view is not None else None
    from kvplan.diagnose.context import plan_context

    ctx = plan_context(engine, facts, srv, user_cmd, options, url)
    if ctx.observed_tokens is None and engine == "sglang":
        ctx.observed_tokens = pool_from_lines(w)
        if ctx.observed_tokens is not None:
            ctx.pool_source = "estimated from the Decode lines (#token / token usage)"
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
                         command_source=ctx.command_source, notes=notes + ctx.notes,
                         sources={"url": url, "log": log, "window_s": window_s or (URL_WINDOW_S if live else
                                                                                   LOG_WINDOW_S if log else None)})
    res.observed = {"samples": w.n, "span_s": w.span_s, "running": w.running, "queued": w.queued,
                    "kv_usage": w.usage, "kv_usage_min": w.usage_min, "kv_usage_max": w.usage_max,
                    "gen_tps": w.gen_tps, "prompt_tps": w.prompt_tps, "per_request_gen_tps": w.per_request_tps,
                    "preemptions": w.preemptions, "retractions": w.retractions, "prefix_hit": w.prefix_hit,
                    "host_kv_usage_max": w.host_usage_max, "pool_tokens": pool, "pool_scope": ctx.pool_scope,
                    "pool_source": ctx.pool_source, "avg_tokens": None if avg is None else round(avg, 1),
                    "avg_tokens_source": avg_src, "max_running": ctx.max_running}
    res.observed = {k: round(v, 3) if isinstance(v, float) else v for k, v in res.observed.items()}
    if ctx.plan is not None:
        p = Pricing(ctx.engine_obj, ctx.cmd, ctx.options, ctx.plan, w, pool_group, avg, ctx.command_known,
                    ctx.max_running, ctx.host_known, res.bottleneck, ctx.graph_gib)
        res.levers, skipped = price(p)
        res.notes.extend(f"lever not priced: {s}" for s in skipped)
    return res
