"""Engine scheduler policies for the simulator, selected by the plan's engine through ONE mapping: ``POLICIES``.

Each module named here provides ``knobs(plan, cmd)`` (the engine's scheduler settings, frozen), ``make_instance(...)``
(one scheduler of that engine) and ``levers(inputs, hint)`` (the launch changes ``kvplan tune`` tries). Nothing else
in ``kvplan.simulate`` looks at an engine's name.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from kvplan.errors import KvplanError

POLICIES: dict[str, str] = {
    "sglang": "kvplan.simulate.policy.sglang_api",
    "vllm": "kvplan.simulate.policy.vllm_api",
}


def policy_for(engine: str) -> ModuleType:
    if engine not in POLICIES:
        raise KvplanError(f"no scheduler model for engine {engine!r}", "known: " + ", ".join(sorted(POLICIES)))
    return importlib.import_module(POLICIES[engine])
