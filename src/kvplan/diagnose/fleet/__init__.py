"""``kvplan diagnose --prometheus URL``: every replica a Prometheus server scrapes, diagnosed like ``--url``.

query (names, ``--match``, PromQL) · discover (series -> replicas) · read (range queries -> each replica's Samples,
bounded) · launches (``-f`` files -> each replica's launch) · run (orchestration: ``run.judge`` per replica) ·
summary (the fleet) · report (Rich).
"""

from __future__ import annotations

from typing import Any


def diagnose_fleet(*args: Any, **kwargs: Any) -> Any:
    """See kvplan.diagnose.fleet.run.diagnose_fleet."""
    from kvplan.diagnose.fleet.run import diagnose_fleet as _run

    return _run(*args, **kwargs)


__all__ = ["diagnose_fleet"]
