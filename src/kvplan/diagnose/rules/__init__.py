"""Bottleneck rules: one per file (``ID``, ``check(ctx) -> Verdict | None``: signals -> cause -> fix).

Rules read the window (the server's own counts) and what is known about the pool; the first rule of ``ORDER``
that matches names the bottleneck, the others that match are reported as secondary. ``unknown`` always matches
and says why nothing else did.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from kvplan.diagnose.window import Window

ORDER = ("host_tier", "prefix_miss", "kv_capacity", "running_cap", "compute_bound", "client_bound", "unknown")


@dataclass
class RuleContext:
    window: Window
    engine: str | None
    pool_tokens: int | None = None  # KV tokens of the whole replica (summed over DP groups), observed if possible
    pool_scope: str = ""  # e.g. "per DP group, 8 groups" / "per engine"
    max_running: int | None = None  # max running requests of the replica (the engine's cap), if known
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    id: str
    cause: str
    fix: str
    evidence: tuple[str, ...]


def pct(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:.0f}%"


def usage_range(w: Window) -> str:
    if w.usage is None:
        return "KV usage not reported"
    if w.usage_min is not None and w.usage_max is not None and w.usage_max - w.usage_min >= 0.005:
        return f"KV pool usage {w.usage_min:.2f}-{w.usage_max:.2f} (mean {w.usage:.2f})"
    return f"KV pool usage {w.usage:.2f}"


def one_request_free(w: Window) -> tuple[float, float] | None:
    """(free fraction of the pool, fraction one running request holds) when both are known."""
    if w.usage is None or not w.running:
        return None
    return 1.0 - w.usage, w.usage / w.running


def classify(ctx: RuleContext) -> list[Verdict]:
    """Every matching verdict, the bottleneck first; ``unknown`` alone when the window is too thin (too_few)."""
    from kvplan.diagnose.rules import too_few

    out: list[Verdict] = []
    for name in ORDER:
        mod = importlib.import_module(f"kvplan.diagnose.rules.{name}")
        v = mod.check(ctx)
        if v is not None and (name != "unknown" or not out):
            out.append(v)
    thin = too_few.check(ctx)
    if thin is not None:  # what the thin window leans to stays as secondary, never the bottleneck
        return [thin, *(v for v in out if v.id != "unknown")]
    return out
