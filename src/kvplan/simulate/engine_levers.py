"""The levers ``check`` and ``diagnose`` know (``Engine.levers``), for ``kvplan tune``: the same LeverSpecs, priced
only where check finds them safe (``engines.levers``: the fraction steps stop where gpu-headroom-low or an error
starts, DP attention at its own largest check-safe fraction), turned into tune's Levers (flags and a group).

``SimLeverInputs`` is the LeverInputs of a simulated launch: the plan of the base launch, what-ifs re-planned by the
engine with check's options, the running batch and the requests in flight of the base launch's simulation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.engines import Engine, LaunchCommand, get_engine
from kvplan.engines.levers import LeverSpec
from kvplan.options import PlanOptions
from kvplan.result import Plan
from kvplan.simulate.launch import LaunchInputs
from kvplan.simulate.policy.lever import Lever


@dataclass
class SimLeverInputs:
    engine: Engine
    current: Plan
    cmd: LaunchCommand
    options: PlanOptions
    host_known: bool
    running_max_seen: int | None = None
    inflight_max_seen: int | None = None
    graph_gib: float | None = None
    _plans: dict[str, Plan] = field(default_factory=dict, repr=False)

    @property
    def running_max(self) -> int | None:
        return self.running_max_seen

    @property
    def inflight_max(self) -> int | None:
        return self.inflight_max_seen

    def replan(self, **changes: Any) -> Plan:
        key = repr(sorted(changes.items()))
        if key not in self._plans:
            self._plans[key] = self.engine.replan(self.cmd, self.options, **changes)
        return self._plans[key]

    def findings(self, plan: Plan, changes: dict[str, Any]) -> list[str]:
        from kvplan.findings import Context, run_rules

        def replan(**more: Any) -> Plan:
            return self.replan(**{**changes, **more})

        return [f"{f.id} ({f.severity})" for f in run_rules(Context(plan, replan))
                if f.severity in ("error", "warning")]

    def unsafe(self, plan: Plan, changes: dict[str, Any]) -> str | None:
        from kvplan.diagnose.levers import first_unsafe

        return first_unsafe(self.engine, self.findings(plan, changes))


def lever_inputs(base: LaunchInputs, hint: dict[str, Any]) -> SimLeverInputs:
    from kvplan.validate import plan_options

    opts = PlanOptions(**{k: v for k, v in plan_options(dict(base.options)).items() if v is not None})
    return SimLeverInputs(get_engine(base.engine), base.plan, base.cmd, opts,
                          host_known=base.options.get("host_mem_gib") is not None,
                          running_max_seen=hint.get("running_max"), inflight_max_seen=hint.get("inflight_max"))


def _lever(spec: LeverSpec) -> Lever:
    group = "fraction" if spec.name.split(" ")[0] in ("fraction", "gpu-util") else spec.name
    return Lever(spec.name, dict(spec.flags), group, "; ".join(spec.notes[:2]), combinable=spec.replicas == 1)


def engine_levers(base: LaunchInputs, hint: dict[str, Any], skipped: list[str]) -> list[Lever]:
    """The engine's levers for the base launch (what cannot be offered goes to ``skipped`` with the reason)."""
    p = lever_inputs(base, hint)
    out: list[Lever] = []
    try:
        out = [_lever(s) for s in p.engine.levers(p, skipped)]
    except Exception as e:  # noqa: BLE001 - the scheduler's own levers are still tried
        skipped.append(f"levers stopped: {e}")
    return out
