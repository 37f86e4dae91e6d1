"""Public API: ``check`` a launch command, or ``plan`` from plain options. Both return a CheckResult,
the same typed object that ``kvplan check --json`` prints (``result.to_dict()``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError
from kvplan.options import PlanOptions
from kvplan.result import CheckResult, Plan

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines import Engine, LaunchCommand


def _options(kw: dict[str, Any]) -> PlanOptions:
    names = {f.name for f in fields(PlanOptions)}
    bad = set(kw) - names
    if bad:
        raise TypeError(f"unknown option(s): {', '.join(sorted(bad))}")
    from kvplan.validate import plan_options

    return PlanOptions(**{k: v for k, v in plan_options(kw).items() if v is not None})


def with_model_notes(p: Plan) -> Plan:
    """The plan with the model's own notes first in its assumptions (catalog resolution, assumed architecture)."""
    from dataclasses import replace

    notes = tuple(n for n in p.model.notes if n not in p.assumptions)
    return replace(p, assumptions=(*notes, *p.assumptions)) if notes else p


def check(command: Sequence[str] | str, **options: Any) -> CheckResult:
    """Plan a real launch command and run every finding rule on it.

    ``options``: gpu, gpu_mem_mib, gpus_per_node, nodes, host_mem_gib, engine_version, model_config,
    weights_gib (per rank), free_gib (per rank), avg_tokens.
    """
    from kvplan.engines import detect_engine, split_command
    from kvplan.findings import Context, run_rules

    opts = _options(options)
    cmd = split_command(command)
    engine = detect_engine(cmd)
    try:
        plan_ = engine.plan(cmd, opts)
    except KvplanError as e:  # a value the engine's own argparse refuses too: plan the defaults, report it
        plan_ = _plan_without_rejected(engine, cmd, opts, e)
    plan_ = with_model_notes(plan_)

    def replan(**changes: Any) -> Plan:
        return engine.replan(cmd, opts, **changes)

    findings = run_rules(Context(plan_, replan))
    fix_flags: dict[str, str | None] = {}
    for f in findings:
        if f.severity in ("error", "warning"):
            for k, v in f.flags.items():
                fix_flags.setdefault(k, v)
    suggested, suggested_plan = None, None
    if fix_flags:
        suggested = engine.rewrite(cmd, fix_flags)
        try:
            suggested_plan = engine.plan(split_command(suggested), opts)
        except Exception:  # noqa: BLE001 - the suggestion is advice; the check itself stands
            suggested_plan = None
    return CheckResult(plan=plan_, findings=tuple(findings), suggested_command=suggested,
                       suggested_plan=suggested_plan)


def _plan_without_rejected(engine: Engine, cmd: LaunchCommand, opts: PlanOptions, error: Exception) -> Plan:
    """The plan of the command without the flags its engine version would reject (re-raises ``error`` when no
    such flag is to blame); the Plan keeps the original command so the flag findings see what was given."""
    from dataclasses import replace

    kept = engine.without_rejected(cmd, opts.engine_version or engine.default_version()[0])
    if kept is None:
        raise error
    try:
        p = engine.plan(kept, opts)
    except KvplanError:
        raise error from None
    return replace(p, command=cmd.text())


def plan(model: str, engine: str | None = None, tp: int = 1, dp: int = 1, pp: int = 1,
         extra_args: Sequence[str] = (), **options: Any) -> CheckResult:
    """The same engine model from plain options: the engine (default: kvplan.engines.DEFAULT_ENGINE) builds the
    launch command they describe; ``extra_args`` are more of its flags."""
    from kvplan.engines import DEFAULT_ENGINE, all_engines, get_engine

    name = engine or DEFAULT_ENGINE
    argv = get_engine(name).plan_argv(model, tp, dp, pp)
    if argv is None:
        able = [e.name for e in all_engines() if e.plan_argv(model, 1, 1, 1) is not None]
        raise KvplanError(f"kvplan plan: engine {name!r} is not supported yet", f"use --engine {' or '.join(able)}")
    return check([*argv, *extra_args], **options)
