"""``kvplan diagnose``: a running server's bottleneck, the evidence, and the levers priced in its own numbers.

stats (log lines -> samples, each engine's serving dialect) · metrics (HTTP -> samples) · window (samples ->
signals) · rules/ (signals -> bottleneck) · context (the launch, planned) · levers (Plans of the engine's lever
specs, anchored on the observed pool) · run (orchestration, JSON; not named ``diagnose``, which would shadow this
function once imported) · report (Rich); the command line is
kvplan.cli.diagnose.
"""

from __future__ import annotations

from typing import Any


def diagnose(*args: Any, **kwargs: Any) -> Any:
    """See kvplan.diagnose.run.diagnose."""
    from kvplan.diagnose.run import diagnose as _diagnose

    return _diagnose(*args, **kwargs)


__all__ = ["diagnose"]
