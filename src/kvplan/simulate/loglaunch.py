"""The calibration log's own launch, and whether its pool may stand for the simulated launch's.

A calibration log contributes step times; the simulated launch is the user's, so its pool (KV tokens, block size,
caps) comes from kvplan's plan of that launch. The log's pool is carried over only when the log's own launch is
known: planned from ``--calibrate-launch`` or from the launch the log shows, and the pool the log reported lies
inside that plan's band (``RankPlan.kv_tokens_range``, widened by ``SLACK`` for block rounding). Then, as
``kvplan diagnose`` does (``evaluation.anchored_tokens``), the simulated pool is

    pool = plan(launch) + (observed - plan(log's launch)) × cell(log's launch) / cell(launch)

which is the reported pool itself when both launches plan the same pool, and otherwise the launch's own plan
corrected by at most the plan's own uncertainty. A reported pool outside the band means the log's launch had a
memory setting the log does not show (an environment variable, a flag it does not print): the log's pool is then
not used, and the launch is simulated with its own plan (the issue: a log whose launch had a 232,960-token pool
replaced an 18 MiB pool because the log did not show its environment prefix).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.errors import KvplanError

SLACK = 0.02  # the reported pool may sit this far outside the plan's band (block rounding, a GiB figure's 0.01)


@dataclass(frozen=True)
class LogLaunch:
    """The launch the calibration log came from, and what the simulation takes from it."""

    command: str | None  # as planned (None: it could not be planned)
    given_by: str  # "--calibrate-launch" | "the log" | "none"
    observed_tokens: int | None  # the pool the log reported (one scheduler)
    planned_tokens: int | None  # kvplan's plan of the log's launch, as the log counts it
    pool_carried: bool  # the log's pool anchors the simulated launch's
    reason: str  # why it is or is not carried over
    inputs: Any = None  # LaunchInputs of the log's launch (None: not planned)
    taken: tuple[tuple[str, Any], ...] = ()  # what else the simulated launch's plan took from the log (option, value)

    def to_dict(self) -> dict:
        return {"command": self.command, "given_by": self.given_by, "observed_kv_tokens": self.observed_tokens,
                "planned_kv_tokens": self.planned_tokens, "pool_used_for_simulation": self.pool_carried,
                "reason": self.reason, "plan_inputs_from_the_log": dict(self.taken),
                "step_times_from": "the log's serving lines, read with the log's own pool"}


def _planned(inputs: Any) -> tuple[int, int, int]:
    """(the plan's pool as the engine's log counts it, low, high) for one scheduler."""
    plan, engine = inputs.plan, inputs.evaluation.engine
    logged = engine.logged_kv_tokens(plan)
    per = plan.per_rank.kv_tokens
    lo, hi = plan.per_rank.kv_tokens_range
    scale = logged / per if per else 1.0
    return logged, int(lo * scale * (1 - SLACK)), int(hi * scale * (1 + SLACK)) + 1


def judge(inputs: Any | None, observed: int | None, given_by: str, why_not: str | None) -> LogLaunch:
    """Whether the log's pool may anchor the simulated launch (``inputs``: the log's launch planned, or None)."""
    if inputs is None:
        return LogLaunch(None, given_by, observed, None, False,
                         f"the log's own launch is not known ({why_not}); pass --calibrate-launch \"<its command>\" "
                         "to name it")
    logged, lo, hi = _planned(inputs)
    if observed is None:
        return LogLaunch(inputs.command, given_by, None, logged, False, "the log reports no KV pool")
    if not lo <= observed <= hi:
        return LogLaunch(inputs.command, given_by, observed, logged, False,
                         f"the log reported {observed:,} KV tokens where its launch ({given_by}) plans {logged:,} "
                         f"({lo:,}-{hi:,}): the log's launch had a memory setting the log does not show (an "
                         "environment variable, a flag it does not print), so its pool is not this launch's")
    return LogLaunch(inputs.command, given_by, observed, logged, True,
                     f"the log reported {observed:,} KV tokens, inside the {lo:,}-{hi:,} its launch ({given_by}) "
                     "plans")


MODEL_FACTS = ("architecture", "attention", "layers", "kv_heads", "head_dim", "kv_lora_rank", "is_mla", "is_moe",
               "weight_bytes")


def differs(log_inputs: Any, inputs: Any) -> str | None:
    """Why the log's launch cannot stand for the simulated one whatever its flags (another engine, another model:
    ``ModelSummary`` facts, not the path, which may name the same checkpoint twice), or None."""
    if log_inputs.engine != inputs.engine:
        return f"the log is {log_inputs.engine}'s, the launch {inputs.engine}'s"
    a, b = log_inputs.plan.model, inputs.plan.model
    diff = [f for f in MODEL_FACTS if getattr(a, f) != getattr(b, f)]
    if diff:
        return f"the log's launch serves another model ({', '.join(diff)} differ: {a.name} vs {b.name})"
    return None


def plan_log_launch(calibrate_launch: str | None, anchor: Any, options: dict) -> tuple[Any | None, str, str | None]:
    """(the log's launch planned or None, who named it, why it is not planned). ``--calibrate-launch`` that cannot be
    planned is an error (the user named it); a launch rebuilt from the log that cannot be planned is only not known."""
    from kvplan.simulate.launch import plan_launch

    if calibrate_launch:
        try:
            return plan_launch(calibrate_launch, options, anchor), "--calibrate-launch", None
        except KvplanError as e:
            raise KvplanError(f"--calibrate-launch cannot be planned: {e.args[0]}",
                              e.hint or "give the calibration log's launch command exactly as it ran") from e
    if not anchor.command:
        return None, "none", "the log does not show its launch"
    try:
        return plan_launch(anchor.command, options, anchor), "the log", None
    except KvplanError as e:
        return None, "the log", f"the launch the log shows cannot be planned: {e.args[0]}"
