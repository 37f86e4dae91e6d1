"""Findings: one small rule per file (id, severity, message with scopes, fix, flags for the fixed command).

A rule is a module with ``ID`` and ``check(ctx) -> list[Finding]``. Rules read the Plan; when a rule needs
"what if", it asks ``ctx.replan(**changes)`` for another Plan from the same engine model.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from kvplan.result import Finding, Plan

RULES = ("kv_pool_empty", "host_oversubscribed", "host_check_blind", "hicache_smaller_than_device",
         "gpu_headroom_low", "context_exceeds_pool", "hicache_prefix_only", "mla_replicated_kv",
         "flag_removed", "flag_unknown", "flag_bad_value", "shm_too_small", "gpu_util_startup_fail",
         "max_model_len_unfit", "unknown_flags",
         "architecture_assumed")


@dataclass(frozen=True)
class Context:
    plan: Plan
    replan: Callable[..., Plan] | None = None  # SGLangArgs field changes -> Plan


def run_rules(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    for name in RULES:
        out.extend(importlib.import_module(f"kvplan.findings.{name}").check(ctx))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(out, key=lambda f: order[f.severity])
