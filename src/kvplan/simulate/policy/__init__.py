"""Engine scheduler policies for the simulator, selected through the engine registry: ``Engine.scheduler_policy``
names the module that models the engine's scheduler (``kvplan.engines.base``), so nothing in ``kvplan.simulate``
names an engine and an engine without one is refused with a one-line error.

Such a module provides (``Policy``) ``knobs(plan, cmd)`` (the engine's scheduler settings, frozen),
``make_instance(...)`` (one scheduler of that engine) and ``levers(inputs, hint)`` (the launch changes ``kvplan tune``
tries).
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, cast

from kvplan.errors import KvplanError


class Policy(Protocol):
    def knobs(self, plan: Any, cmd: Any) -> Any: ...

    def make_instance(self, idx: int, inputs: Any, model: Any, sink: Any, host_bw_bytes_per_s: float) -> Any: ...

    def levers(self, inputs: Any, hint: dict | None = None) -> list[Any]: ...


def policy_for(engine: str) -> Policy:
    """The scheduler model of the engine registered as ``engine`` (KvplanError when it has none)."""
    from kvplan.engines import all_engines, get_engine

    module = get_engine(engine).scheduler_policy
    if not module:
        known = ", ".join(e.name for e in all_engines() if e.scheduler_policy)
        raise KvplanError(f"no scheduler model for engine {engine!r}", f"simulated engines: {known}")
    return cast(Policy, importlib.import_module(module))
