"""Findings: one small rule per file (id, severity, message with scopes, fix, flags for the fixed command).

A rule is a module with ``ID`` and ``check(ctx) -> list[Finding]``. Rules read the Plan; when a rule needs
"what if", it asks ``ctx.replan(**changes)`` for another Plan from the same engine model. The rules here hold for
every engine; each engine package adds its own (``kvplan/engines/<engine>/findings/``). Every rule has a position:
findings of equal severity are reported in position order.

Severity scale (one for every rule; the verdict follows: any error -> fail (exit 1), else any warning -> warn, else
ok; both exit 0):

- **error**: the engine will fail, hang or get killed with this launch (its argparse rejects a flag, it refuses to
  start, no KV room, host memory oversubscribed with nothing to stop it);
- **warning**: it starts, but a named risk is likely (host tiers above 90 % of the node's available memory, GPU
  headroom under the engine's own recommendation, requests the pool cannot hold rejected, ...);
- **info**: good to know (capacity advice, what kvplan could not check, e.g. host memory not given).
"""

from __future__ import annotations

import importlib
from typing import cast

from kvplan.engines.base import FindingContext, FindingRule
from kvplan.result import Finding

Context = FindingContext  # the name rules use
GENERIC: tuple[tuple[int, str], ...] = (
    (15, "container_memory_limit"), (16, "container_memory_request"), (20, "host_oversubscribed"),
    (25, "host_near_full"), (26, "gpu_count_mismatch"),
    (27, "ipc_missing"), (28, "host_pin_slow"), (90, "flag_removed"), (92, "flag_unknown"), (94, "flag_bad_value"),
    (130, "unknown_flags"), (140, "architecture_assumed"),
)
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def rules_for(engine: str) -> list[FindingRule]:
    """Generic and engine rules, in position order (gathered once per engine object: every check asks)."""
    from kvplan.engines import get_engine

    eng = get_engine(engine)
    hit = _RULES.get(engine)
    if hit is None or hit[0] is not eng:
        rules = [(pos, cast(FindingRule, importlib.import_module(f"kvplan.findings.{name}")))
                 for pos, name in GENERIC]
        rules += eng.finding_rules()
        hit = _RULES[engine] = (eng, tuple(rule for _, rule in sorted(rules, key=lambda r: r[0])))
    return list(hit[1])


_RULES: dict[str, tuple[object, tuple[FindingRule, ...]]] = {}


def run_rules(ctx: FindingContext) -> list[Finding]:
    out: list[Finding] = []
    for rule in rules_for(ctx.plan.engine):
        out.extend(rule.check(ctx))
    return sorted(out, key=lambda f: SEVERITY_ORDER[f.severity])
