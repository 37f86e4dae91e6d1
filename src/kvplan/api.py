"""Public API: ``check`` a launch command, or ``plan`` from plain options. Both return a CheckResult,
the same typed object that ``kvplan check --json`` prints (``result.to_dict()``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from kvplan.options import PlanOptions
from kvplan.result import CheckResult


def _options(kw: dict[str, Any]) -> PlanOptions:
    names = {f.name for f in fields(PlanOptions)}
    bad = set(kw) - names
    if bad:
        raise TypeError(f"unknown option(s): {', '.join(sorted(bad))}")
    from kvplan.validate import plan_options

    return PlanOptions(**{k: v for k, v in plan_options(kw).items() if v is not None})


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
    plan_ = engine.plan(cmd, opts)

    def replan(**changes: Any):
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


def plan(model: str, engine: str = "sglang", tp: int = 1, dp: int = 1, pp: int = 1,
         extra_args: Sequence[str] = (), **options: Any) -> CheckResult:
    """The same engine model from plain options: builds the launch command the options describe."""
    from kvplan.errors import KvplanError

    if engine != "sglang":
        raise KvplanError(f"kvplan plan: engine {engine!r} is not supported yet", "use --engine sglang")
    argv = ["python", "-m", "sglang.launch_server", "--model-path", model, "--tp-size", str(tp)]
    if dp > 1:
        argv += ["--dp-size", str(dp)]
    if pp > 1:
        argv += ["--pp-size", str(pp)]
    return check([*argv, *extra_args], **options)
