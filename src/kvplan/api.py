"""Public API: ``check`` a launch command, or ``plan`` from plain options. Both return a CheckResult,
the same typed object that ``kvplan check --json`` prints (``result.to_dict()``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError
from kvplan.options import PlanOptions
from kvplan.result import CheckResult

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.evaluation import Evaluation


def _options(kw: dict[str, Any]) -> PlanOptions:
    names = {f.name for f in fields(PlanOptions)}
    bad = set(kw) - names
    if bad:
        raise KvplanError(f"unknown option(s): {', '.join(sorted(str(b)[:40] for b in bad))[:300]}",
                          "options: " + ", ".join(sorted(n for n in names if not n.endswith("_source"))))
    from kvplan.validate import plan_options

    return PlanOptions(**{k: v for k, v in plan_options(kw).items() if v is not None})


def check(command: Sequence[str] | str, **options: Any) -> CheckResult:
    """Plan a real launch command and run every finding rule on it (``kvplan.evaluation``: the one evaluation of a
    launch every command asks).

    ``options``: gpu, gpu_mem_mib, gpus_per_node, nodes, host_mem_gib, engine_version, model_config,
    weights_gib (per rank), free_gib (per rank), avg_tokens.
    """
    return evaluate_command(command, **options).result


def evaluate_command(command: Sequence[str] | str, **options: Any) -> Evaluation:
    """The Evaluation of a launch command with check's options (validated): plan, findings, repaired launch."""
    from kvplan.evaluation import evaluate

    return evaluate(command, _options(options))


def plan(model: str, engine: str | None = None, tp: int = 1, dp: int = 1, pp: int = 1,
         extra_args: Sequence[str] = (), **options: Any) -> CheckResult:
    """The same engine model from plain options: the engine (default: kvplan.engines.DEFAULT_ENGINE) builds the
    launch command they describe; ``extra_args`` are more of its flags."""
    from kvplan import validate
    from kvplan.engines import DEFAULT_ENGINE, all_engines, get_engine

    model = validate.path("model", model, hint="an HF id (org/name) or a checkpoint path")
    name = DEFAULT_ENGINE if engine is None else validate.text("engine", engine, max_len=64)
    tp, dp, pp = (validate.count(k, v, 1, validate.MAX_RANKS, hint="a whole number of GPUs")
                  for k, v in (("tp", tp), ("dp", dp), ("pp", pp)))
    if isinstance(extra_args, str) or not isinstance(extra_args, (list, tuple)):
        raise KvplanError(f"extra_args must be a list of flags, got {type(extra_args).__name__}",
                          'e.g. extra_args=["--mem-fraction-static", "0.85"]')
    argv = get_engine(name).plan_argv(model, tp, dp, pp)
    if argv is None:
        able = [e.name for e in all_engines() if e.plan_argv(model, 1, 1, 1) is not None]
        raise KvplanError(f"kvplan plan: engine {name!r} is not supported yet", f"use --engine {' or '.join(able)}")
    return check([*argv, *extra_args], **options)
