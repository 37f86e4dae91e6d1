"""The one place the simulator reads a Plan: a launch command (+ hardware options, + the user's log) -> LaunchInputs.

Everything the scheduler and the step model need comes from ``kvplan.check`` (the same engine model as
``kvplan check``): per rank ``kv_tokens``, ``kv_bytes_per_token``, ``weights_bytes``, ``host_kv_tokens``; per
replica ``dp_groups``, ``max_running_requests``, ``replicas``; the engine's scheduler knobs (page size, chunked
prefill, ...) through the engine's policy module (simulate/policy). What-ifs are new Plans of rewritten commands.

With a log of the running server (``--calibrate``), the plan takes what the log measured (SGLang: the free memory
before weights; the engine version). The KV pool is anchored on the pool the server reported only when the log's own
launch is known and its plan holds that pool (simulate/loglaunch.py), the same rule as ``kvplan diagnose``
(``evaluation.anchored_tokens``): ``pool = plan + (observed - plan(log's launch)) × cell(log's launch) / cell``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kvplan.errors import KvplanError


@dataclass(frozen=True)
class LogAnchor:
    """What a server log says about the launch it came from."""

    path: str
    engine: str | None = None
    version: str | None = None
    observed_tokens: int | None = None  # KV pool of one scheduler (SGLang: per DP worker; vLLM: per engine)
    free_gib: float | None = None  # SGLang "Load weight begin. avail mem=" (min over ranks)
    command: tuple[str, ...] | None = None  # the launch as the log shows it (explain.rebuild_command)
    decode_interval: int = 40  # SGLang decode_log_interval (ServerArgs default 40)


@dataclass(frozen=True)
class LaunchInputs:
    engine: str
    engine_version: str
    command: str
    kv_tokens: int  # per scheduler instance (one DP-attention group / one engine), anchored when a log gives it
    kv_tokens_plan: int  # the plan's own figure
    kv_source: str
    kv_bytes_per_token: int  # per rank
    weights_bytes: int  # per rank
    max_running_requests: int  # per scheduler instance
    dp_groups: int  # scheduler instances of one replica (SGLang DP attention), stepping in lock step
    replicas: int  # independent engines behind the router
    host_kv_tokens: int  # per scheduler instance (HiCache host pool)
    gpu: str
    model_path: str | None
    knobs: Any  # the engine's scheduler settings (frozen; simulate/policy/<engine>_knobs.py)
    plan: Any = field(repr=False, compare=False)
    cmd: Any = field(repr=False, compare=False)
    options: dict = field(default_factory=dict, repr=False, compare=False)
    findings: tuple = ()
    evaluation: Any = field(default=None, repr=False, compare=False)  # kvplan.evaluation.Evaluation of the launch
    anchor: Any = field(default=None, repr=False, compare=False)  # (Plan of the log's launch, its observed pool)

    @property
    def instances(self) -> int:
        return self.dp_groups * self.replicas

    def summary(self) -> dict:
        return {"engine": self.engine, "engine_version": self.engine_version, "command": self.command,
                "kv_tokens_per_instance": self.kv_tokens, "kv_tokens_plan": self.kv_tokens_plan,
                "kv_source": self.kv_source, "kv_bytes_per_token": self.kv_bytes_per_token,
                "weights_bytes_per_rank": self.weights_bytes, "max_running_requests_per_instance":
                self.max_running_requests, "dp_groups": self.dp_groups, "replicas": self.replicas,
                "host_kv_tokens_per_instance": self.host_kv_tokens, "gpu": self.gpu,
                "knobs": {k: v for k, v in vars(self.knobs).items()}}


def read_anchor(path: str) -> LogAnchor:
    """The startup facts of a server log (pool, free memory, version); serving lines are read by calibration."""
    from kvplan.explain import observed_inputs, parse_log

    try:
        facts = parse_log(path)
    except KvplanError:
        return LogAnchor(path)
    from kvplan.explain import rebuild_command

    tokens = facts.kv_tokens
    r0 = facts.first_rank()
    if tokens is None and r0 is not None:
        tokens = r0.kv_tokens
    free = observed_inputs(facts, []).get("free_gib")
    try:
        command: tuple[str, ...] | None = tuple(rebuild_command(facts, None))
    except KvplanError:
        command = None
    interval = facts.args.get("decode_log_interval")
    return LogAnchor(path, facts.engine, facts.version, int(tokens) if tokens else None, free, command,
                     int(interval) if isinstance(interval, (int, float)) and interval > 0 else 40)


def inputs_from(ev: Any, options: dict, anchor: tuple[Any, int] | None = None) -> LaunchInputs:
    """LaunchInputs of an Evaluation; ``anchor``: (the Plan of the launch a log came from, the pool it reported)."""
    from kvplan.evaluation import anchored_tokens
    from kvplan.simulate.policy import policy_for

    plan = ev.plan
    pol = policy_for(plan.engine)
    groups = max(1, plan.per_replica.dp_groups)
    mine = plan.per_replica.kv_tokens // groups
    tokens = mine if anchor is None else anchored_tokens(ev.engine, plan, anchor[0], anchor[1])
    if anchor is None:
        src = "kvplan's plan of this launch"
    elif ev.engine.logged_kv_tokens(plan) == ev.engine.logged_kv_tokens(anchor[0]):
        src = f"the pool the log reported ({anchor[1]:,} tokens): the log's launch plans this launch's pool"
    else:
        src = (f"kvplan's plan of this launch ({mine:,} tokens) corrected by the plan's error the log showed for its "
               f"own launch ({anchor[1]:,} reported, {ev.engine.logged_kv_tokens(anchor[0]):,} planned)")
    return LaunchInputs(
        engine=plan.engine, engine_version=plan.engine_version, command=plan.command, kv_tokens=max(0, tokens),
        kv_tokens_plan=mine, kv_source=src, kv_bytes_per_token=plan.per_rank.kv_bytes_per_token,
        weights_bytes=plan.per_rank.weights_bytes,
        max_running_requests=max(1, plan.per_replica.max_running_requests // groups), dp_groups=groups,
        replicas=max(1, plan.per_replica.replicas), host_kv_tokens=plan.per_rank.host_kv_tokens,
        gpu=plan.cluster.gpu, model_path=getattr(plan.settings, "model_path", None),
        knobs=pol.knobs(plan, ev.cmd), plan=plan, cmd=ev.cmd, options=dict(options),
        findings=tuple(ev.findings), evaluation=ev, anchor=anchor)


def _options(options: dict, anchor: LogAnchor | None) -> dict:
    opts = {k: v for k, v in options.items() if v is not None}
    if anchor is not None:
        if anchor.version and "engine_version" not in opts:
            opts["engine_version"] = anchor.version
        if anchor.free_gib is not None and "free_gib" not in opts:
            opts["free_gib"] = anchor.free_gib
    return opts


def plan_launch(command: Any, options: dict, anchor: LogAnchor | None = None,
                log_launch: LaunchInputs | None = None) -> LaunchInputs:
    """The one evaluation of the command with the hardware options (and what the log measured). Its pool is anchored
    on the pool the log reported: for the launch the log came from (``log_launch``, already evaluated) when given,
    else for this very launch (the log is taken to be its own)."""
    from kvplan.api import evaluate_command

    opts = _options(options, anchor)
    ev = evaluate_command(command, **opts)
    if log_launch is not None:
        return inputs_from(ev, opts, log_launch.anchor)
    observed = anchor.observed_tokens if anchor is not None else None
    return inputs_from(ev, opts, (ev.plan, observed) if observed is not None else None)


def rewrite(base: LaunchInputs, flags: dict[str, str | None]) -> LaunchInputs:
    """The base launch with ``flags`` changed: a rewrite evaluated like any launch, anchored as the base is."""
    return inputs_from(base.evaluation.rewrite(flags), base.options, base.anchor)


def repaired(base: LaunchInputs) -> LaunchInputs | None:
    """The base launch when check finds no error in it, else check's repaired launch (None: no fix passes)."""
    rep = base.evaluation.repaired
    if rep is None:
        return None
    return base if rep is base.evaluation else inputs_from(rep, base.options, base.anchor)


def with_replicas(inputs: LaunchInputs, replicas: int) -> LaunchInputs:
    return replace(inputs, replicas=max(1, replicas))
