"""The vocabulary of ``kvplan diagnose``'s levers that engines speak: a lever is a LeverSpec (the flags the launch
command changes, the parsed-args fields the plan is re-made with), priced by kvplan.diagnose.levers with the same
engine model as ``check``. ``LeverInputs`` is what an engine's ``levers()`` may read; ``steps`` is the common
"raise a fraction by 0.03 while check finds it safe" lever, ``largest_safe`` the largest check-safe value of a field.

Check-safe (``LeverInputs.unsafe``): the lever's plan has no error finding and none of the engine's
``headroom_findings`` (SGLang: gpu-headroom-low, also as a warning). A lever is priced only up to there, one rule
for ``check``, ``diagnose`` and ``tune``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kvplan.engines.cmdline import LaunchCommand
from kvplan.result import Plan

STEP, FRACTION_MAX, MAX_STEPS = 0.03, 0.98, 12  # fraction levers: 0.03 per step, at most 0.98, at most 12 steps
FINE_STEP = 0.01  # largest_safe: the grain users tune a fraction with (gpu-headroom-low's own fix uses it too)


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

    @property
    def inflight_max(self) -> int | None: ...  # the most requests in flight (running + waiting) at once

    def replan(self, **changes: Any) -> Plan: ...

    def findings(self, plan: Plan, changes: dict[str, Any]) -> list[str]: ...  # "id (severity)", errors/warnings

    def unsafe(self, plan: Plan, changes: dict[str, Any]) -> str | None: ...  # "id (severity)" that makes it unsafe


def steps(p: LeverInputs, field_name: str, flag: str, label: str, start: float, skipped: list[str],
          note: Callable[[float], str], top: float = FRACTION_MAX) -> Iterator[LeverSpec]:
    """``field_name`` raised by STEP from ``start`` up to ``top``, each step re-planned; the first step that is not
    check-safe ends the steps (it is listed in ``skipped`` with its finding) and the last step before it says it is
    the largest check-safe step."""
    last: LeverSpec | None = None
    for k in range(1, MAX_STEPS + 1):
        x = round(start + STEP * k, 2)
        if x > top:
            break
        bad = p.unsafe(p.replan(**{field_name: x}), {field_name: x})
        if bad:
            skipped.append(f"{flag} {x:.2f} and above: {bad} (not check-safe; the steps stop here)")
            if last is not None:
                last.notes.append(f"the largest check-safe step: {flag} {x:.2f} gives {bad}")
            break
        if last is not None:
            yield last
        last = LeverSpec(f"{label} {x:.2f}", {flag: f"{x:.2f}"}, {field_name: x}, [note(x)])
    if last is not None:
        yield last


def largest_safe(p: LeverInputs, field_name: str, start: float, changes: dict[str, Any],
                 top: float = FRACTION_MAX) -> tuple[float | None, str | None]:
    """The largest value of ``field_name`` (a FINE_STEP multiple from ``start`` up to ``top``) at which the launch with
    ``changes`` is check-safe (None when none is), and what the next value up gives (None: ``top`` itself is safe).

    A lever can be unsafe at both ends (no KV left below, no headroom above) and safe in between: the values are
    tried in STEP strides from ``start`` until a safe one is followed by an unsafe one, then FINE_STEP by FINE_STEP
    between the two (each value one Plan)."""

    def bad(x: float) -> str | None:
        more = {**changes, field_name: x}
        return p.unsafe(p.replan(**more), more)

    grid = [round(start + STEP * k, 2) for k in range(int((top - start) / STEP + 1e-9) + 1)]
    if grid[-1] < top:
        grid.append(round(top, 2))
    safe: float | None = None
    above: str | None = None
    for x in grid:
        why = bad(x)
        if why is None:
            safe = x
        elif safe is not None:
            above = why
            break
        else:
            above = why
    if safe is None:
        return None, above
    if above is None:
        return safe, None
    x = safe
    while True:  # refine between the last safe stride and the first unsafe one
        nxt = round(x + FINE_STEP, 2)
        why = bad(nxt)
        if why is not None:
            return x, why
        x = nxt
