"""The levers ``check`` and ``diagnose`` know (``Engine.levers``), for ``kvplan tune``: the same LeverSpecs, priced
only where check finds them safe (``engines.levers``: the fraction steps stop where gpu-headroom-low or an error
starts, DP attention at its own largest check-safe fraction), turned into tune's Levers (flags and a group).

The LeverInputs are ``kvplan.evaluation.WhatIfs`` of the launch tune starts from (the repaired launch), with the
running batch and the requests in flight its simulation showed.
"""

from __future__ import annotations

from typing import Any

from kvplan.engines.levers import LeverSpec
from kvplan.evaluation import WhatIfs
from kvplan.simulate.launch import LaunchInputs
from kvplan.simulate.policy.lever import Lever


def lever_inputs(base: LaunchInputs, hint: dict[str, Any]) -> WhatIfs:
    host_known = base.plan.per_node.host_available_bytes is not None
    return WhatIfs(base.evaluation, host_known, running_max_seen=hint.get("running_max"),
                   inflight_max_seen=hint.get("inflight_max"))


def _lever(spec: LeverSpec) -> Lever:
    group = "fraction" if spec.name.split(" ")[0] in ("fraction", "gpu-util") else spec.name
    return Lever(spec.name, dict(spec.flags), group, "; ".join(spec.notes[:2]), combinable=spec.replicas == 1
                 and not spec.name.startswith("2 replicas"), replicas=spec.replicas)


def engine_levers(base: LaunchInputs, hint: dict[str, Any], skipped: list[str]) -> list[Lever]:
    """The engine's levers for the base launch (what cannot be offered goes to ``skipped`` with the reason)."""
    p = lever_inputs(base, hint)
    out: list[Lever] = []
    try:
        out = [_lever(s) for s in p.base.engine.levers(p, skipped)]
    except Exception as e:  # noqa: BLE001 - the scheduler's own levers are still tried
        skipped.append(f"levers stopped: {e}")
    return out
