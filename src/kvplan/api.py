"""Public API: ``check`` a launch command, or ``plan`` from plain options. Both return a CheckResult,
the same typed object that ``kvplan check --json`` prints (``result.to_dict()``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError
from kvplan.options import PlanOptions
from kvplan.result import CheckResult, Finding, Plan

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
    from kvplan.suggest import suggest

    opts = _options(options)
    cmd = split_command(command)
    engine = detect_engine(cmd)
    plan_, findings = _checked(engine, cmd, opts)

    def recheck(text: str) -> tuple[Plan, list[Finding]]:  # the suggested command, checked like any launch
        return _checked(engine, split_command(text), opts)

    s = suggest(findings, lambda flags: engine.rewrite(cmd, flags), recheck)
    return CheckResult(plan=plan_, findings=tuple(findings), suggested_command=s.command,
                       suggested_plan=s.plan, suggested_findings=s.findings, suggestion_note=s.note)


def _checked(engine: Engine, cmd: LaunchCommand, opts: PlanOptions) -> tuple[Plan, list[Finding]]:
    """The plan of ``cmd`` and every finding rule's findings on it (no suggestion)."""
    from kvplan.findings import Context, run_rules

    try:
        plan_ = engine.plan(cmd, opts)
    except KvplanError as e:  # a value the engine's own argparse refuses too: plan the defaults, report it
        plan_ = _plan_without_rejected(engine, cmd, opts, e)
    plan_ = with_model_notes(plan_)

    def replan(**changes: Any) -> Plan:
        return engine.replan(cmd, opts, **changes)

    return plan_, run_rules(Context(plan_, replan))


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
