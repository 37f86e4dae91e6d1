"""Levers priced in the server's own numbers, with the one evaluation of a launch ``kvplan check`` makes.

The launch the server runs (``running``: rebuilt from its log or info, or the command given) is what the window
measured; the launch the levers rewrite (``base``) is the launch the user gives (``--launch-command``, else the
running one), repaired as ``check`` repairs it (every error's fix applied: ``Evaluation.repaired``). A lever is a
rewrite of ``base`` evaluated like any launch (plan and findings: ``kvplan.evaluation``), never a second formula, and
its KV figure is anchored on the pool the server reported for the running launch
(``kvplan.evaluation.anchored_tokens``). ``kv_tokens`` is per replica (summed over DP-attention groups);
``requests`` and ``expected_gen_tps`` count every replica the lever runs.

Every lever is priced only where ``check`` finds it safe (no error finding and none of the engine's
``headroom_findings``, SGLang's gpu-headroom-low): the fraction steps stop there, DP attention is priced at its own
largest check-safe fraction, and each says which value it was priced at. A lever that runs on more GPUs than the
cluster given (``2 replicas`` of TP8 on 8 GPUs) says how many it needs (``gpus_needed``), and its figures are what
those GPUs would add, not a free gain. When the given launch fails check, a ``repaired`` row says so and every lever
starts from the repaired launch; when it cannot be repaired, no lever is priced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvplan.diagnose.window import Window
from kvplan.engines.base import Engine
from kvplan.engines.levers import LeverSpec
from kvplan.evaluation import Evaluation, WhatIfs, anchored_tokens
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
class Pricing(WhatIfs):
    """Everything a lever needs: the launch the levers rewrite (``base``, repaired), the launch the server runs
    (``running``) and what the server showed over the window."""

    running: Evaluation | None = None  # the launch the window measured (None: the same as base)
    given: Evaluation | None = None  # the launch the user gave, before its repair (None: base)
    window: Window = field(default_factory=lambda: Window(None))
    observed_tokens: int | None = None  # SGLang: per DP group (max_total_num_tokens); vLLM: per engine
    avg_tokens: float | None = None
    command_known: bool = False
    max_running: int | None = None  # observed cap of the replica (summed over DP groups)
    bottleneck: str = "unknown"

    def __post_init__(self) -> None:
        w = self.window
        self.running_max_seen = w.running_max
        self.inflight_max_seen = None if w.running_max is None else w.running_max + (w.queued_max or 0)

    @property
    def engine(self) -> Engine:
        return self.base.engine

    @property
    def server(self) -> Evaluation:
        return self.running or self.base

    def rank_tokens(self, plan: Plan) -> int:
        """Tokens of one pool, as the engine's log counts them (SGLang: per rank = per DP group; vLLM: the engine),
        anchored on the pool the server reported for the launch it runs."""
        return anchored_tokens(self.engine, plan, self.server.plan, self.observed_tokens)

    def groups(self, plan: Plan) -> int:
        return max(1, plan.per_replica.dp_groups)


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


def _lever(p: Pricing, spec: LeverSpec, ev: Evaluation | None = None) -> Lever:
    """``spec`` priced: its rewrite of the base launch (or ``ev``, a launch of its own), anchored on the server."""
    ev = ev or p.base.rewrite(spec.flags)
    plan, server = ev.plan, p.server.plan
    cur_total = p.rank_tokens(server) * p.groups(server)
    kv = cur_total if spec.same_pool else p.rank_tokens(plan) * p.groups(plan)
    copies = max(1, plan.per_replica.replicas) * spec.replicas // max(1, server.per_replica.replicas)
    mrr = plan.per_replica.max_running_requests or None
    if p.max_running and plan.per_replica.max_running_requests == server.per_replica.max_running_requests:
        mrr = p.max_running  # the cap the server itself reported
    req = _requests(p, kv, mrr, copies)
    tps, basis = expected_tps(p, kv / cur_total if cur_total else 1.0, copies, mrr * copies if mrr else None)
    change = " ".join(k if v == "" else f"{k}={v}" if not k.startswith("-") else f"{k} {v}"
                      for k, v in spec.flags.items() if v is not None)
    lev = Lever(spec.name, change, kv, req, tps, basis, ev.text if p.command_known else None, copies,
                notes=list(spec.notes))
    lev.kv_delta_pct = (kv * copies / cur_total - 1) * 100 if cur_total else None
    need, have = _gpus(plan, spec.replicas)
    if need > have:
        lev.gpus_needed = need
        c = plan.cluster
        lev.notes.insert(0, f"needs {need} GPUs; the cluster has {have} ({c.gpus_per_node} per node × {c.nodes} "
                         f"node(s); without --gpus-per-node, the launch's own): the figures are what {need - have} "
                         "more GPU(s) would add, not a free gain")
    lev.findings = ev.labels()
    return lev


def _gpus(plan: Plan, copies: int) -> tuple[int, int]:
    """(GPUs the lever runs on: ``copies`` launches of ``plan``, GPUs of the cluster given)."""
    per_copy = plan.per_replica.ranks * max(1, plan.per_replica.replicas)
    return per_copy * copies, plan.cluster.gpus_per_node * plan.cluster.nodes


def _requests(p: Pricing, kv_tokens: int, mrr: int | None, replicas: int) -> int | None:
    if not p.avg_tokens:
        return None
    fit = int(kv_tokens // max(1.0, p.avg_tokens))
    return (min(fit, mrr) if mrr else fit) * replicas


# the machine at the moment of a plan, not the launch: what it had free, and what other processes held
MEASURED = ("host_available_bytes", "host_available_gib", "host_available_source", "host_others_bytes")


def _same_launch(a: Plan, b: Plan) -> bool:
    """Two plans that allocate the same (the given command and the log's rebuilt one, written differently). The
    host memory this machine had free when each was planned is what was measured, not what the launch allocates:
    two plans of one launch read it a moment apart, so it is left out."""
    def alloc(p: Plan) -> tuple[dict[str, Any], ...]:
        node = {k: v for k, v in p.per_node.to_dict().items() if k not in MEASURED}
        return p.per_rank.to_dict(), node, p.per_replica.to_dict()

    return alloc(a) == alloc(b)


def price(p: Pricing) -> tuple[list[Lever], list[str]]:
    """``current`` (the server as it runs) first; then the launch the levers start from when it is not the running
    one (the given launch, or its repair when it fails check); then every lever the engine has, each a rewrite of it.
    The second list says what could not be priced."""
    note = ("the launch as it runs; KV as the server reported it" if p.observed_tokens is not None else
            "KV from kvplan's plan: the server did not report its pool")
    given = p.given or p.base
    cur = _lever(p, LeverSpec("current", {}, [note]), p.server)
    if cur.command is not None and p.running is not None and _same_launch(given.plan, p.running.plan):
        cur.command = given.text  # the launch as the user spells it
    levers = [cur]
    skipped: list[str] = []
    if given.errors:
        repair = given.repair_note()
        if given is not p.base:  # repaired: every lever starts from the fixed launch
            levers.append(_lever(p, LeverSpec("repaired", {}, [f"the given launch {repair}; every lever below "
                                                               "starts from it"]), p.base))
        else:
            skipped.append(f"no lever is priced: the given launch {repair}")
            return levers, skipped
    elif p.running is not None and not _same_launch(p.base.plan, p.running.plan):
        levers.append(_lever(p, LeverSpec("given launch", {}, ["the launch given with --launch-command (not the "
                                                               "one the server runs); every lever below starts "
                                                               "from it"]), p.base))
    try:
        for spec in p.engine.levers(p, skipped):
            try:
                ev = p.base.rewrite(spec.flags)
                bad = ev.unsafe()
                if bad is not None and not ev.placement_only():  # one rule: a lever check refuses is no lever
                    skipped.append(f"{spec.name}: {bad} (not check-safe)")
                    continue
                levers.append(_lever(p, spec, ev))
            except Exception as e:  # noqa: BLE001 - one lever that cannot be planned does not stop the others
                skipped.append(f"{spec.name}: {e}")
    except Exception as e:  # noqa: BLE001
        skipped.append(f"levers stopped: {e}")
    return levers, skipped
