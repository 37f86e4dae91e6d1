"""The launch behind a running server, planned with the same engine model as ``kvplan check``.

The command comes from ``--launch-command`` (what the user runs again: the fixed commands edit it), else from the
log, else from the server's own info (SGLang ``launch_command`` or its args; vLLM /v1/models and
``vllm:cache_config_info``, which is a rebuilt command: its levers carry no command). The plan takes the free-memory
baseline the log measured (SGLang "Load weight begin. avail mem="), so a fraction step is priced on the server's
own P; weights stay the engine model's, so levers that change them (DP attention) are priced too.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from kvplan.errors import KvplanError
from kvplan.logs.facts import LogFacts

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.base import Engine
    from kvplan.engines.cmdline import LaunchCommand
    from kvplan.options import PlanOptions
    from kvplan.result import Plan

PLAN_FIELDS = ("gpu", "gpu_mem_mib", "gpus_per_node", "nodes", "host_mem_gib", "engine_version", "model_config",
               "weights_gib", "free_gib", "kv_memory_gib")
REMOTE_HOST_GIB = 1024.0  # a log's or remote server's host is not this machine (only host-tier levers need it)


@dataclass
class PlanContext:
    plan: Plan | None = None
    engine_obj: Engine | None = None
    cmd: LaunchCommand | None = None
    options: PlanOptions | None = None
    version: str | None = None
    observed_tokens: int | None = None  # SGLang: per DP group; vLLM: per engine
    pool_scope: str = ""
    pool_source: str | None = None
    max_running: int | None = None  # per replica
    command_text: str | None = None
    command_source: str | None = None
    command_known: bool = False
    host_known: bool = False
    graph_gib: float | None = None
    notes: list[str] = field(default_factory=list)


def _command(facts: LogFacts | None, srv: LogFacts | None, user_cmd: Sequence[str] | None, model_config: str | None,
             ctx: PlanContext) -> list[str] | None:
    from kvplan.explain import rebuild_command

    if user_cmd:  # what the user will run again; the log still gives the pool, P and the version
        ctx.command_known, ctx.command_source = True, "--launch-command"
        return list(user_cmd)
    if facts is not None and (facts.args.get("model_path") or facts.args.get("model") or facts.model):
        ctx.command_known, ctx.command_source = True, "rebuilt from the log"
        return rebuild_command(facts, None, model_config)
    if srv is not None:
        launch = srv.args.get("launch_command")
        if isinstance(launch, str) and launch.strip():
            ctx.command_known, ctx.command_source = True, "server_info launch_command"
            return shlex.split(launch)
        if srv.model:
            ctx.command_source = "rebuilt from the server's info (not the exact launch: levers carry no command)"
            return rebuild_command(srv, None, model_config)
    return None


def _observed(engine: Engine, facts: LogFacts | None, srv: LogFacts | None, ctx: PlanContext) -> None:
    for src, f in (("the log", facts), ("the server's info", srv)):
        if f is None:
            continue
        tokens = engine.observed_kv_tokens(f, ctx.plan)
        if tokens:
            ctx.observed_tokens, ctx.pool_source = int(tokens), src
            break
    for f in (facts, srv):
        if f is not None and f.max_running_requests and ctx.max_running is None:
            groups = ctx.plan.per_replica.dp_groups if ctx.plan is not None else 1
            ctx.max_running = f.max_running_requests * groups  # printed per DP worker (SGLang)
    if ctx.max_running is None and ctx.plan is not None:
        ctx.max_running = engine.running_cap(ctx.plan)


def plan_context(engine: str | None, facts: LogFacts | None, srv: LogFacts | None, user_cmd: Sequence[str] | None,
                 options: dict[str, Any],
                 url: str | None) -> PlanContext:
    from kvplan.engines import ENGINES, detect_engine, get_engine, split_command
    from kvplan.options import PlanOptions

    ctx = PlanContext()
    opts = {k: v for k, v in options.items() if k in PLAN_FIELDS and v is not None}
    local = url is not None and (urlparse(url).hostname or "") in ("127.0.0.1", "localhost", "::1")
    ctx.host_known = "host_mem_gib" in opts or (local and not facts)
    if not ctx.host_known:
        opts["host_mem_gib"] = REMOTE_HOST_GIB
    version = opts.get("engine_version") or (facts.version if facts is not None else None) or (
        srv.version if srv is not None else None)
    if version:
        opts["engine_version"] = version
    if facts is not None and "free_gib" not in opts:  # the free-memory baseline the log measured, if it shows one
        from kvplan.explain import observed_inputs

        free = observed_inputs(facts, []).get("free_gib")
        if free is not None:
            opts["free_gib"] = free
    if facts is not None and facts.engine in ENGINES and not (opts.get("gpu") or opts.get("gpu_mem_mib")):
        from kvplan.explain_inputs import gpu_from_log  # no --gpu: the GPU the log's memory figures bound

        gpu_from_log(get_engine(facts.engine), facts, opts, ctx.notes)
    if facts is not None:
        r = facts.first_rank()
        ctx.graph_gib = r.graph_mem_gib if r is not None else None
    if options.get("avg_tokens"):
        opts["avg_tokens"] = int(options["avg_tokens"])
    try:
        argv = _command(facts, srv, user_cmd, opts.get("model_config"), ctx)
    except KvplanError as e:
        argv = None
        ctx.notes.append(f"cannot rebuild the launch: {e}")
    if argv is None:
        ctx.notes.append("the launch is unknown (no --launch-command, and neither the log nor the server names the "
                         "model): levers are not priced")
    else:
        try:
            ctx.cmd = split_command(argv)
            ctx.engine_obj = detect_engine(ctx.cmd)
            ctx.options = PlanOptions(**opts)
            ctx.plan = ctx.engine_obj.plan(ctx.cmd, ctx.options)
            ctx.version, ctx.command_text = ctx.plan.engine_version, ctx.cmd.text()
        except KvplanError as e:
            ctx.plan = None
            ctx.notes.append(f"cannot plan the launch ({e}): levers are not priced")
    ctx.version = ctx.version or version
    eng = get_engine(engine) if engine in ENGINES else ctx.engine_obj
    if eng is not None:
        _observed(eng, facts, srv, ctx)
    if ctx.plan is not None:
        ctx.pool_scope = (eng or ctx.engine_obj or get_engine(ctx.plan.engine)).pool_scope(ctx.plan)
        if ctx.observed_tokens is None:
            ctx.notes.append("the server did not report its KV pool: levers use kvplan's plan of the launch")
    return ctx
