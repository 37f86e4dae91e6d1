"""The launch behind a running server, evaluated with the same engine model as ``kvplan check``.

Two launches matter. The one the server runs (``running``) is what the window measured: rebuilt from the log (its
flags; ``--launch-command`` fills in what the log does not show), else the server's own info (SGLang
``launch_command`` or its args; vLLM /v1/models and ``vllm:cache_config_info``), else ``--launch-command``. The one
the user runs again (``given``: ``--launch-command``, else the running one) is what the levers rewrite, repaired as
``check`` repairs it. Both are planned with the free-memory baseline the log measured (SGLang "Load weight begin.
avail mem="), so a fraction step is priced on the server's own P; weights stay the engine model's, so levers that
change them (DP attention) are priced too.

Host memory follows check's "whose host" rule (``--host-mem-gib``, else this machine's only when the plan is for
this machine): a log's or a remote server's node memory is never invented, and host-tier levers say when it is not
known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan.engines.cmdline import tokenize
from kvplan.errors import KvplanError
from kvplan.logs.facts import LogFacts

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.base import Engine
    from kvplan.evaluation import Evaluation
    from kvplan.result import Plan

PLAN_FIELDS = ("gpu", "gpu_mem_mib", "gpus_per_node", "nodes", "host_mem_gib", "local_host", "engine_version",
               "model_config", "weights_gib", "free_gib", "kv_memory_gib")


@dataclass
class PlanContext:
    running: Evaluation | None = None  # the launch the server runs (what the window measured)
    given: Evaluation | None = None  # the launch the user runs again (--launch-command), before repair
    version: str | None = None
    observed_tokens: int | None = None  # SGLang: per DP group; vLLM: per engine
    pool_scope: str = ""
    pool_source: str | None = None
    max_running: int | None = None  # per replica
    command_source: str | None = None
    command_known: bool = False
    graph_gib: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def plan(self) -> Plan | None:
        return self.running.plan if self.running is not None else None

    @property
    def engine_obj(self) -> Engine | None:
        return self.running.engine if self.running is not None else None

    @property
    def command_text(self) -> str | None:
        ev = self.given or self.running
        return ev.text if ev is not None else None

    @property
    def host_known(self) -> bool:
        """The node's host memory is known (given, or this machine's under check's rule)."""
        return self.plan is not None and self.plan.per_node.host_available_bytes is not None


def _commands(facts: LogFacts | None, srv: LogFacts | None, user_cmd: Sequence[str] | None,
              model_config: str | None, ctx: PlanContext) -> tuple[list[str] | None, list[str] | None]:
    """(the launch the server runs, the launch the user runs again)."""
    from kvplan.explain import rebuild_command

    given = list(user_cmd) if user_cmd else None
    if given:
        ctx.command_known, ctx.command_source = True, "--launch-command"
    if facts is not None and (facts.args.get("model_path") or facts.args.get("model") or facts.model):
        if not given:
            ctx.command_known, ctx.command_source = True, "rebuilt from the log"
        return rebuild_command(facts, given, model_config), given
    if srv is not None:
        launch = srv.args.get("launch_command")
        if isinstance(launch, str) and launch.strip():
            if not given:
                ctx.command_known, ctx.command_source = True, "server_info launch_command"
            return tokenize(launch), given
        if srv.model:
            if not given:
                ctx.command_source = ("rebuilt from the server's info (not the exact launch: levers carry no "
                                      "command)")
            return rebuild_command(srv, given, model_config), given
    return given, given


def _observed(engine: Engine, facts: LogFacts | None, srv: LogFacts | None, ctx: PlanContext,
              srv_source: str) -> None:
    for src, f in (("the log", facts), (srv_source, srv)):
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
                 options: dict[str, Any], url: str | None, srv_source: str = "the server's info") -> PlanContext:
    """``srv``: what the server's endpoints (or a metrics store: ``srv_source`` names it) said."""
    from kvplan.engines import ENGINES, get_engine
    from kvplan.evaluation import evaluate
    from kvplan.options import PlanOptions

    ctx = PlanContext()
    opts = {k: v for k, v in options.items() if k in PLAN_FIELDS and v is not None}
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
        running, given = _commands(facts, srv, user_cmd, opts.get("model_config"), ctx)
    except KvplanError as e:
        running = given = None
        ctx.notes.append(f"cannot rebuild the launch: {e}")
    if running is None:
        ctx.notes.append("the launch is unknown (no --launch-command, and neither the log nor the server names the "
                         "model): levers are not priced")
    else:
        try:
            ctx.running = evaluate(running, PlanOptions(**opts))
            ctx.version = ctx.running.plan.engine_version
        except KvplanError as e:
            ctx.notes.append(f"cannot plan the launch ({e}): levers are not priced")
        if ctx.running is not None and given is not None:
            try:
                ctx.given = ctx.running.other(given)
            except KvplanError as e:
                ctx.notes.append(f"cannot plan the given launch ({e}): levers start from the running one")
    ctx.version = ctx.version or version
    eng = get_engine(engine) if engine in ENGINES else ctx.engine_obj
    if eng is not None:
        _observed(eng, facts, srv, ctx, srv_source)
    if ctx.plan is not None:
        ctx.pool_scope = (eng or get_engine(ctx.plan.engine)).pool_scope(ctx.plan)
        if ctx.observed_tokens is None:
            ctx.notes.append("the server did not report its KV pool: levers use kvplan's plan of the launch")
        if not ctx.host_known:
            ctx.notes.append(f"host memory: {ctx.plan.per_node.host_available_source}; host-tier levers are sized "
                             "without it (pass --host-mem-gib)")
    return ctx
