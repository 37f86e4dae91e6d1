"""The vocabulary of ``kvplan diagnose``'s levers that engines speak: a lever is a LeverSpec (the flags the launch
command changes, the parsed-args fields the plan is re-made with), priced by kvplan.diagnose.levers with the same
engine model as ``check``. ``LeverInputs`` is what an engine's ``levers()`` may read; ``steps`` is the common
"raise a fraction by 0.03 until an error finding appears" lever."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kvplan.engines.cmdline import LaunchCommand
from kvplan.result import Plan

STEP, FRACTION_MAX, MAX_STEPS = 0.03, 0.98, 12  # fraction levers: 0.03 per step, at most 0.98, at most 12 steps


@dataclass
class LeverSpec:
    name: str
    flags: dict[str, str | None]  # what the launch command changes (Engine.rewrite; "" sets a boolean flag)
    changes: dict[str, Any] | None  # parsed-args fields to replan with; None: the replica's plan is unchanged
    notes: list[str] = field(default_factory=list)
    replicas: int = 1
    same_pool: bool = False  # the device pool is unchanged by design (a host prefix tier: prefix reuse only)


class LeverInputs(Protocol):
    """What the levers of a running server are built from."""

    current: Plan  # the launch as it runs, planned
    cmd: LaunchCommand
    host_known: bool  # the host memory of the server is known (host-tier levers can be sized)
    graph_gib: float | None  # CUDA-graph memory per rank the log showed

    @property
    def running_max(self) -> int | None: ...  # the most requests that ran at once in the window

    def replan(self, **changes: Any) -> Plan: ...

    def findings(self, plan: Plan, changes: dict[str, Any]) -> list[str]: ...  # "id (severity)", errors/warnings


def steps(p: LeverInputs, field_name: str, flag: str, label: str, start: float, skipped: list[str],
          note: Callable[[float], str], top: float = FRACTION_MAX) -> Iterator[LeverSpec]:
    """``field_name`` raised by STEP from ``start`` up to ``top``, each step re-planned; the first step with an error
    finding ends the steps (it is listed in ``skipped`` with that finding)."""
    for k in range(1, MAX_STEPS + 1):
        x = round(start + STEP * k, 2)
        if x > top:
            break
        errors = [f for f in p.findings(p.replan(**{field_name: x}), {field_name: x}) if f.endswith("(error)")]
        if errors:
            skipped.append(f"{flag} {x:.2f} and above: {errors[0]} (not safe; the steps stop here)")
            break
        yield LeverSpec(f"{label} {x:.2f}", {flag: f"{x:.2f}"}, {field_name: x}, [note(x)])
