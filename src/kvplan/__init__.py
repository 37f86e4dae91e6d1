"""kvplan: what every GPU rank and every host will allocate for an SGLang or vLLM launch.

Public API (same typed result that ``kvplan check --json`` prints)::

    from kvplan import check, plan
    result = check(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"], gpu="h100")
    result.plan.per_rank.kv_tokens, result.verdict, result.to_dict()["per_rank"]["kv_tokens"]

``check`` and ``plan`` return a CheckResult (its Plan: per rank, per node, per replica, typed engine settings; its
Findings); bad input raises KvplanError (one line with a hint).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError

__version__ = "0.1.0"
__all__ = ["CheckResult", "Finding", "KvplanError", "NodePlan", "Plan", "RankPlan", "ReplicaPlan", "__version__",
           "check", "plan"]

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.api import check, plan
    from kvplan.result import CheckResult, Finding, NodePlan, Plan, RankPlan, ReplicaPlan

_LAZY = {"check": "kvplan.api", "plan": "kvplan.api", "CheckResult": "kvplan.result", "Finding": "kvplan.result",
         "NodePlan": "kvplan.result", "Plan": "kvplan.result", "RankPlan": "kvplan.result",
         "ReplicaPlan": "kvplan.result"}


def __getattr__(name: str) -> Any:
    # Lazy: `import kvplan` must stay cheap for the CLI.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
