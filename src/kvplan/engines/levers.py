"""The vocabulary of ``kvplan diagnose``'s and ``kvplan tune``'s launch levers that engines speak: a lever is a
LeverSpec, the flags its launch command changes. The launch is rewritten with them and evaluated like any launch
(``kvplan.evaluation``: plan, findings), so a lever's figures are ``check``'s figures of its command, never a second
formula. ``LeverInputs`` is what an engine's ``levers()`` may read; ``steps`` is the common "raise a fraction by 0.03
while check finds it safe" lever, ``largest_safe`` the largest check-safe value of a flag.

Check-safe (``LeverInputs.unsafe``): the rewritten launch has no error finding and none of the engine's
``headroom_findings`` (SGLang: gpu-headroom-low, also as a warning). A lever is priced only up to there, one rule
for ``check``, ``diagnose`` and ``tune``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kvplan.engines.cmdline import LaunchCommand
from kvplan.result import Plan

STEP, FRACTION_MAX, MAX_STEPS = 0.03, 0.98, 12  # fraction levers: 0.03 per step, at most 0.98, at most 12 steps
FINE_STEP = 0.01  # largest_safe: the grain users tune a fraction with (gpu-headroom-low's own fix uses it too)


@dataclass
class LeverSpec:
    name: str
    flags: dict[str, str | None]  # what the launch command changes (Engine.rewrite; "" sets a boolean flag)
    notes: list[str] = field(default_factory=list)
    replicas: int = 1  # copies of the rewritten launch that run (2: a second launch of it behind a router)
    same_pool: bool = False  # the device pool is unchanged by design (a host prefix tier: prefix reuse only)


class LeverInputs(Protocol):
    """What the levers of a launch are built from: the launch they rewrite (check's repaired launch), and what the
    server (or the simulation of the launch) showed."""

    host_known: bool  # the host memory of the node is known (host-tier levers can be sized)
    graph_gib: float | None  # CUDA-graph memory per rank the log showed

    @property
    def current(self) -> Plan: ...  # the launch the levers rewrite, planned

    @property
    def cmd(self) -> LaunchCommand: ...

    @property
    def running_max(self) -> int | None: ...  # the most requests that ran at once

    @property
    def inflight_max(self) -> int | None: ...  # the most requests in flight (running + waiting) at once

    def plan_of(self, flags: dict[str, str | None]) -> Plan: ...  # the rewritten launch's plan (check's)

    def unsafe(self, flags: dict[str, str | None]) -> str | None: ...  # "id (severity)" that makes it unsafe


def steps(p: LeverInputs, flag: str, label: str, start: float, skipped: list[str],
          note: Callable[[float], str], top: float = FRACTION_MAX) -> Iterator[LeverSpec]:
    """``flag`` raised by STEP from ``start`` up to ``top``, each step a rewritten launch; the first step that is not
    check-safe ends the steps (it is listed in ``skipped`` with its finding) and the last step before it says it is
    the largest check-safe step."""
    last: LeverSpec | None = None
    for k in range(1, MAX_STEPS + 1):
        x = round(start + STEP * k, 2)
        if x > top:
            break
        bad = p.unsafe({flag: f"{x:.2f}"})
        if bad:
            skipped.append(f"{flag} {x:.2f} and above: {bad} (not check-safe; the steps stop here)")
            if last is not None:
                last.notes.append(f"the largest check-safe step: {flag} {x:.2f} gives {bad}")
            break
        if last is not None:
            yield last
        last = LeverSpec(f"{label} {x:.2f}", {flag: f"{x:.2f}"}, [note(x)])
    if last is not None:
        yield last


def largest_safe(p: LeverInputs, flag: str, start: float, flags: dict[str, str | None],
                 top: float = FRACTION_MAX) -> tuple[float | None, str | None]:
    """The largest value of ``flag`` (a FINE_STEP multiple from ``start`` up to ``top``) at which the launch rewritten
    with ``flags`` is check-safe (None when none is), and what the next value up gives (None: ``top`` itself is safe).

    A lever can be unsafe at both ends (no KV left below, no headroom above) and safe in between: the values are
    tried in STEP strides from ``start`` until a safe one is followed by an unsafe one, then FINE_STEP by FINE_STEP
    between the two (each value one Plan). A safe window narrower than a stride (DP attention: no KV at 0.89, no
    headroom at 0.92, safe at 0.90-0.91) is found by trying every FINE_STEP value when no stride was safe."""

    def bad(x: float) -> str | None:
        return p.unsafe({**flags, flag: f"{x:.2f}"})

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
        fine = [round(start + FINE_STEP * k, 2) for k in range(int((top - start) / FINE_STEP + 1e-9) + 1)]
        for x in fine:  # (the stride values again: the evaluations are cached)
            why = bad(x)
            if why is None:
                safe = x
            elif safe is not None:
                return safe, why
            else:
                above = why
        return safe, (None if safe is not None else above)
    if above is None:
        return safe, None
    x = safe
    while True:  # refine between the last safe stride and the first unsafe one
        nxt = round(x + FINE_STEP, 2)
        why = bad(nxt)
        if why is not None:
            return x, why
        x = nxt
