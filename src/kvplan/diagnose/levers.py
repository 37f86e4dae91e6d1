"""Levers priced in the server's own numbers, with the same engine model as ``kvplan check``.

A lever is a Plan of a modified launch (``engine.replan``), never a second formula. Its KV figure is anchored on
the pool the server reported: the plan's error for the current launch, in bytes per rank, carries over to the
lever, so ``tokens(lever) = plan(lever) + (observed - plan(current)) × cell(current) / cell(lever)``. With an
unchanged cell this is ``observed + plan(lever) - plan(current)``: SGLang 0.85 -> 0.88 adds exactly 3 % of the
free-memory baseline P divided by the bytes per token. ``kv_tokens`` is per replica (summed over DP-attention
groups); ``requests`` and ``expected_gen_tps`` count every replica the lever runs.

Every lever is priced only where ``check`` finds it safe (``Pricing.unsafe``: no error finding and none of the
engine's ``headroom_findings``, SGLang's gpu-headroom-low): the fraction steps stop there, DP attention is priced at
its own largest check-safe fraction, and each says which value it was priced at. A lever that runs on more GPUs than
the cluster given (``2 replicas`` of TP8 on 8 GPUs) says how many it needs (``gpus_needed``), and its figures are
what those GPUs would add, not a free gain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvplan.diagnose.window import Window
from kvplan.engines.base import Engine
from kvplan.engines.cmdline import LaunchCommand
from kvplan.engines.levers import LeverSpec
from kvplan.options import PlanOptions
from kvplan.result import Plan


@dataclass
class Lever:
    name: str
    change: str  # the flags the lever sets, as a user would type them
    kv_tokens: int | None  # per replica, summed over DP groups, anchored on the observed pool
    requests: int | None  # requests of the observed average length that fit at once, all replicas
    expected_gen_tps: float | None
    gen_tps_basis: str  # how expected_gen_tps was computed, or why it is null
    command: str | None
    replicas: int = 1
    kv_delta_pct: float | None = None  # total KV (kv_tokens × replicas) vs current
    findings: list[str] = field(default_factory=list)  # "id (severity)" of the lever plan's errors/warnings
    notes: list[str] = field(default_factory=list)
    gpus_needed: int | None = None  # GPUs the lever runs on when that is more than the cluster has, else None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "change": self.change, "kv_tokens": self.kv_tokens, "requests": self.requests,
                "expected_gen_tps": None if self.expected_gen_tps is None else round(self.expected_gen_tps, 1),
                "expected_gen_tps_reason": self.gen_tps_basis, "command": self.command, "replicas": self.replicas,
                "kv_delta_pct": None if self.kv_delta_pct is None else round(self.kv_delta_pct, 1),
                "findings": self.findings, "notes": self.notes, "gpus_needed": self.gpus_needed}


@dataclass
class Pricing:
    """Everything a lever needs: the engine model, the launch, and what the server showed."""

    engine: Engine
    cmd: LaunchCommand
    options: PlanOptions
    current: Plan
    window: Window
    observed_tokens: int | None  # SGLang: per DP group (max_total_num_tokens); vLLM: per engine
    avg_tokens: float | None
    command_known: bool
    max_running: int | None = None  # observed cap of the replica (summed over DP groups)
    host_known: bool = False
    bottleneck: str = "unknown"
    graph_gib: float | None = None  # SGLang "Capture cuda graph end ... mem usage" per rank, from the log
    # what-if Plans and their findings, by the changes they were made with: a lever's safety search, its pricing and
    # its findings ask for the same Plan (Plans are frozen)
    _plans: dict[str, Plan] = field(default_factory=dict, repr=False)
    _found: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def replan(self, **changes: Any) -> Plan:
        key = repr(sorted(changes.items()))
        if key not in self._plans:
            self._plans[key] = self.engine.replan(self.cmd, self.options, **changes)
        return self._plans[key]

    @property
    def running_max(self) -> int | None:
        return self.window.running_max

    @property
    def inflight_max(self) -> int | None:
        w = self.window
        if w.running_max is None:
            return None
        return w.running_max + (w.queued_max or 0)

    def findings(self, plan: Plan, changes: dict[str, Any]) -> list[str]:
        key = repr(sorted(changes.items()))
        if plan is not self._plans.get(key):
            return _findings(self, plan, changes)
        if key not in self._found:
            self._found[key] = _findings(self, plan, changes)
        return list(self._found[key])

    def unsafe(self, plan: Plan, changes: dict[str, Any]) -> str | None:
        """The first finding of the lever's plan that makes it unsafe: an error, or one of the engine's
        ``headroom_findings`` (SGLang: gpu-headroom-low, a warning); None when check finds it safe."""
        return first_unsafe(self.engine, self.findings(plan, changes))

    def rank_tokens(self, plan: Plan) -> int:
        """Tokens of one pool, as the engine's log counts them (SGLang: per rank = per DP group; vLLM: the engine),
        anchored on the observed pool."""
        return anchored_tokens(self.engine, plan, self.current, self.observed_tokens)

    def groups(self, plan: Plan) -> int:
        return max(1, plan.per_replica.dp_groups)


def anchored_tokens(engine: Engine, plan: Plan, current: Plan, observed_tokens: int | None) -> int:
    """Tokens of one pool of ``plan`` as ``engine``'s log counts them, anchored on the pool the server reported for
    ``current`` (None: the plan's own figure): ``plan + (observed - plan(current)) × cell(current) / cell(plan)``."""
    mine = engine.logged_kv_tokens(plan)
    if observed_tokens is None:
        return mine
    ratio = current.per_rank.kv_bytes_per_token / max(1, plan.per_rank.kv_bytes_per_token)
    return max(0, round(mine + (observed_tokens - engine.logged_kv_tokens(current)) * ratio))


def first_unsafe(engine: Engine, findings: list[str]) -> str | None:
    """Of ``findings`` ("id (severity)"), the first error or engine headroom finding."""
    for f in findings:
        if f.endswith("(error)") or f.split(" ", 1)[0] in engine.headroom_findings:
            return f
    return None


def _findings(p: Pricing, plan: Plan, changes: dict[str, Any]) -> list[str]:
    from kvplan.findings import Context, run_rules

    def replan(**more: Any) -> Plan:
        return p.replan(**{**changes, **more})

    return [f"{f.id} ({f.severity})" for f in run_rules(Context(plan, replan)) if f.severity in ("error", "warning")]


def _rate_model(w: Window) -> Callable[[float], float] | None:
    """Per-request generation rate as a function of running requests, when the window shows it falling."""
    sl = w.rate_slope
    if sl is None or sl[2] <= 0 or sl[3] >= sl[2]:
        return None
    lo, hi, r_lo, r_hi = sl
    b = (r_hi - r_lo) / (hi - lo)
    return lambda n: max(0.1 * r_lo, r_lo + b * (n - lo))


def expected_tps(p: Pricing, kv_ratio: float, replicas: int, mrr_total: int | None) -> tuple[float | None, str]:
    """Generation tok/s with the lever, from the per-request rate observed in the window."""
    w = p.window
    if w.gen_tps is None:
        return None, "no generation throughput in the window"
    if not w.running:
        return None, "no request ran in the window: the server is idle"
    demand = w.running + (w.queued or 0)
    conc = min(w.running * kv_ratio, demand / replicas)
    capped = "the client's demand (running + waiting)" if conc == demand / replicas else "the KV pool"
    if mrr_total:
        if mrr_total / replicas < conc:
            capped = "max running requests"
        conc = min(conc, mrr_total / replicas)
    per_req = w.gen_tps / w.running
    model = _rate_model(w)
    basis = (f"{w.gen_tps:.0f} tok/s observed at {w.running:.0f} running ({per_req:.1f} tok/s per request); "
             f"{conc:.0f} run at once per replica, capped by {capped}")
    if model is not None:
        n_best = max((n for n in range(1, int(conc) + 1)), key=lambda n: n * model(n), default=conc)
        conc = min(conc, n_best)
        total = conc * model(conc) * (w.gen_tps / (w.running * model(w.running)))
        basis += "; per-request rate falls with the batch as in the window (fitted), no gain past its peak"
    else:
        total = conc * per_req
        if p.bottleneck == "compute-bound" and w.gen_tps_max is not None:
            total = min(total, w.gen_tps_max)
            basis += f"; capped at the {w.gen_tps_max:.0f} tok/s peak seen (compute-bound)"
        else:
            basis += "; per-request rate assumed to hold at the new batch size"
    return total * replicas, basis


def _lever(p: Pricing, spec: LeverSpec, plan: Plan | None = None) -> Lever:
    plan = plan or (p.current if spec.changes is None else p.replan(**spec.changes))
    cur_total = p.rank_tokens(p.current) * p.groups(p.current)
    kv = cur_total if spec.same_pool else p.rank_tokens(plan) * p.groups(plan)
    mrr = plan.per_replica.max_running_requests or None
    if p.max_running and plan.per_replica.max_running_requests == p.current.per_replica.max_running_requests:
        mrr = p.max_running  # the cap the server itself reported
    req = _requests(p, kv, mrr, spec.replicas)
    tps, basis = expected_tps(p, kv / cur_total if cur_total else 1.0, spec.replicas,
                              mrr * spec.replicas if mrr else None)
    change = " ".join(k if v == "" else f"{k}={v}" if not k.startswith("-") else f"{k} {v}"
                      for k, v in spec.flags.items() if v is not None)
    cmd = None
    if p.command_known:
        cmd = p.engine.rewrite(p.cmd, spec.flags) if spec.flags else p.cmd.text()
    lev = Lever(spec.name, change, kv, req, tps, basis, cmd, spec.replicas, notes=list(spec.notes))
    lev.kv_delta_pct = (kv * spec.replicas / cur_total - 1) * 100 if cur_total else None
    need, have = _gpus(plan, spec.replicas)
    if need > have:
        lev.gpus_needed = need
        c = plan.cluster
        lev.notes.insert(0, f"needs {need} GPUs ({spec.replicas} × {need // spec.replicas}); the cluster has {have} "
                         f"({c.gpus_per_node} per node × {c.nodes} node(s); without --gpus-per-node, the launch's "
                         f"own): the figures are what {need - have} more GPU(s) would add, not a free gain")
    if spec.changes or spec.name == "current":
        lev.findings = _findings(p, plan, spec.changes or {})
    return lev


def _gpus(plan: Plan, replicas: int) -> tuple[int, int]:
    """(GPUs the lever's launch runs on, GPUs of the cluster given)."""
    per_copy = plan.per_replica.ranks * max(1, plan.per_replica.replicas)
    return per_copy * replicas, plan.cluster.gpus_per_node * plan.cluster.nodes


def _requests(p: Pricing, kv_tokens: int, mrr: int | None, replicas: int) -> int | None:
    if not p.avg_tokens:
        return None
    fit = int(kv_tokens // max(1.0, p.avg_tokens))
    return (min(fit, mrr) if mrr else fit) * replicas


def price(p: Pricing) -> tuple[list[Lever], list[str]]:
    """``current`` first, then every lever the engine has; the second list says what could not be priced."""
    note = ("the launch as it runs; KV as the server reported it" if p.observed_tokens is not None else
            "KV from kvplan's plan: the server did not report its pool")
    levers = [_lever(p, LeverSpec("current", {}, None, [note]))]
    skipped: list[str] = []
    try:
        for spec in p.engine.levers(p, skipped):
            try:
                levers.append(_lever(p, spec))
            except Exception as e:  # noqa: BLE001 - one lever that cannot be planned does not stop the others
                skipped.append(f"{spec.name}: {e}")
    except Exception as e:  # noqa: BLE001
        skipped.append(f"levers stopped: {e}")
    return levers, skipped
