"""``kvplan tune``: the levers ``check`` knows, each a rewrite of the launch evaluated like any launch
(``kvplan.evaluation``), simulated on the same workload.

1. The current launch is simulated first (its result also tells the levers the running batch to aim at). When it
   fails check (an error finding: it would not start, or would hang the host), it is not simulated: the repaired
   launch (check's suggested command) is, and every lever rewrites it; when no fix passes, nothing is ranked.
2. The engine's launch levers (``Engine.levers``, as diagnose prices them: only where check finds them safe; see
   simulate/engine_levers.py) and its scheduler levers (simulate/policy/<engine>_levers.py) are rewritten into the
   command and planned by ``kvplan check``; a candidate that is not check-safe (an error finding, or one of the
   engine's ``headroom_findings``, SGLang's gpu-headroom-low) is refused (and, within a group such as the
   static-fraction steps, so are the larger steps after it). A candidate on more GPUs than the cluster given says how
   many it needs (``gpus_needed``).
3. The best lever of each group that beats the current launch is combined pairwise with the others (not two levers
   setting the same flag).
Candidates are ranked by predicted steady-state generation throughput, then by p99 end-to-end latency. Only what
runs on the GPUs given is ranked (``--gpus-per-node`` × ``--nodes``, else the launch's own): a candidate that needs
more is simulated and listed apart with the GPUs it needs. KV figures are distinct KV tokens per replica, with the
tokens of one rank's pool beside them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvplan.simulate.launch import LaunchInputs, rewrite
from kvplan.simulate.policy.lever import Lever
from kvplan.simulate.result import SimResult

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Candidate:
    name: str
    flags: dict[str, str | None]
    command: str | None
    note: str = ""
    result: SimResult | None = None
    refused: str | None = None  # the error finding that refused it
    warnings: tuple[str, ...] = ()
    kv_tokens: int | None = None  # per scheduler instance (one rank's pool: a DP-attention group, or an engine)
    gpus_needed: int | None = None  # GPUs it runs on when that is more than the cluster given has
    kv_tokens_replica: int | None = None  # distinct KV tokens per replica (summed over its DP-attention groups)
    replicas: int = 1

    @property
    def tps(self) -> float:
        r = self.result
        if r is None:
            return -1.0
        return r.steady_gen_tps if r.steady_gen_tps is not None else r.gen_tps

    @property
    def p99_e2e_s(self) -> float | None:
        return self.result.e2e_s.get("p99") if self.result is not None else None

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {"name": self.name, "flags": self.flags, "command": self.command, "note": self.note,
                "refused": self.refused, "warnings": list(self.warnings), "kv_tokens_per_instance": self.kv_tokens,
                "kv_tokens_per_rank": self.kv_tokens, "kv_tokens_per_replica": self.kv_tokens_replica,
                "replicas": self.replicas, "gpus_needed": self.gpus_needed,
                "predicted": None if r is None else {
                    "gen_tps": round(r.gen_tps, 1), "steady_gen_tps": None if r.steady_gen_tps is None
                    else round(r.steady_gen_tps, 1), "prompt_tps": round(r.prompt_tps, 1),
                    "ttft_p99_s": r.ttft_s.get("p99"), "tpot_p99_s": r.tpot_s.get("p99"),
                    "e2e_p99_s": r.e2e_s.get("p99"),
                    "running_mean": round(r.running_mean, 1), "queued_mean": round(r.queued_mean, 1),
                    "preempted_requests": r.preempted_requests, "makespan_s": round(r.makespan_s, 1)}}


@dataclass(frozen=True)
class TuneResult:
    current: Candidate
    ranked: tuple[Candidate, ...]
    refused: tuple[Candidate, ...]
    workload: dict[str, Any]
    step_model: dict[str, Any]
    notes: tuple[str, ...] = field(default=())
    more_gpus: tuple[Candidate, ...] = ()  # simulated, not ranked: they need more GPUs than the cluster given

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "workload": self.workload, "step_model": self.step_model,
                "current": self.current.to_dict(), "ranked": [c.to_dict() for c in self.ranked],
                "needs_more_gpus": [c.to_dict() for c in self.more_gpus],
                "refused": [c.to_dict() for c in self.refused], "notes": list(self.notes)}


def _gpus_needed(plan: Any, copies: int = 1) -> int | None:
    """GPUs ``copies`` launches of ``plan`` run on, when more than the cluster given has (given, detected, or the
    launch's own GPUs: a cluster not given is taken to be what the launch runs on)."""
    need = plan.per_replica.ranks * max(1, plan.per_replica.replicas) * copies
    return need if need > plan.cluster.gpus_per_node * plan.cluster.nodes else None


def _candidate(name: str, flags: dict[str, str | None], inputs: LaunchInputs, note: str = "",
               result: SimResult | None = None, refused: str | None = None, copies: int = 1) -> Candidate:
    ev = inputs.evaluation
    heads = ev.engine.headroom_findings
    return Candidate(name, flags, inputs.command, note, result, refused,
                     tuple(f.id for f in ev.findings if f.severity == "warning" and f.id not in heads),
                     inputs.kv_tokens, _gpus_needed(inputs.plan, copies), inputs.kv_tokens * inputs.dp_groups,
                     inputs.replicas * copies)


def tune(base: LaunchInputs, simulate: Callable[[LaunchInputs], SimResult],
         progress: Callable[[str, int], None] | None = None) -> TuneResult:
    """``simulate(inputs)`` runs the workload on a launch with its step model; ``progress(name, total)``."""
    from kvplan.simulate.engine_levers import engine_levers
    from kvplan.simulate.launch import repaired, with_replicas
    from kvplan.simulate.policy import policy_for

    pol = policy_for(base.engine)
    tick = progress or (lambda name, total: None)
    start = repaired(base)
    notes: list[str] = []
    refused: list[Candidate] = []
    if start is None:
        current = _candidate("current", {}, base, "the launch as given",
                             refused=base.evaluation.repair_note())
        return TuneResult(current, (), (), {}, {}, (f"nothing ranked: the launch {current.refused}",))
    if start is not base:
        note = base.evaluation.repair_note()
        current = _candidate("current", {}, base, "the launch as given: not simulated (check: it would not run)",
                             refused=note.split(" → ", 1)[0])
        notes.append(f"the launch as given {note}; tune starts from the repaired launch")
        start_res = simulate(start)
        first = _candidate("repaired", {}, start, "check's suggested command: every error's fix applied", start_res)
    else:
        start_res = simulate(base)
        current = first = _candidate("current", {}, base, "the launch as given", start_res)
    series = start_res.series
    hint = {"running_mean": start_res.running_mean,  # the series' points are means over their bins: whole requests up
            "running_max": math.ceil(max((p["running"] or 0) for p in series)) if series else None,
            "inflight_max": math.ceil(max((p["running"] or 0) + (p["queued"] or 0) for p in series))
            if series else None}
    skipped: list[str] = []
    singles: list[Lever] = [*engine_levers(start, hint, skipped), *pol.levers(start, hint)]
    total = len(singles) + 3
    ok: list[tuple[Lever, Candidate]] = []
    stopped: set[str] = set()

    def run(lv: Lever) -> Candidate:
        tick(lv.name, total)
        try:
            inputs = rewrite(start, lv.flags)
        except Exception as e:  # noqa: BLE001 - a lever the engine model cannot plan is reported, not fatal
            return Candidate(lv.name, lv.flags, None, lv.note, refused=f"cannot plan: {e}")
        bad = inputs.evaluation.unsafe()
        if bad is not None and not inputs.evaluation.placement_only():
            why = next((f"{f.id}: {f.message}" for f in inputs.evaluation.findings
                        if f"{f.id} ({f.severity})" == bad), bad)
            return _candidate(lv.name, lv.flags, inputs, lv.note, refused=why, copies=lv.replicas)
        sim_inputs = with_replicas(inputs, inputs.replicas * lv.replicas) if lv.replicas > 1 else inputs
        return _candidate(lv.name, lv.flags, inputs, lv.note, simulate(sim_inputs), copies=lv.replicas)

    for lv in singles:
        if lv.group in stopped:
            continue
        c = run(lv)
        if c.refused:
            refused.append(c)
            stopped.add(lv.group)
        else:
            ok.append((lv, c))
    best: dict[str, tuple[Lever, Candidate]] = {}
    for lv, c in ok:
        if (lv.combinable and c.gpus_needed is None and c.tps > first.tps
                and (lv.group not in best or c.tps > best[lv.group][1].tps)):
            best[lv.group] = (lv, c)
    tops = sorted(best.values(), key=lambda p: -p[1].tps)[:3]
    combos = [a[0].merged(b[0]) for i, a in enumerate(tops) for b in tops[i + 1:]
              if not set(a[0].flags) & set(b[0].flags)]
    for lv in combos:
        c = run(lv)
        if c.refused:
            refused.append(c)
        else:
            ok.append((lv, c))
    fits = [c for _, c in ok if c.gpus_needed is None]
    if first is not current:  # the repaired launch is ranked with its rewrites
        fits.insert(0, first)
    more = [c for _, c in ok if c.gpus_needed is not None]
    ranked = sorted(fits, key=lambda c: (-c.tps, c.p99_e2e_s if c.p99_e2e_s is not None else float("inf")))
    notes += [f"lever not tried: {s}" for s in skipped]
    if more:
        notes.append("not ranked (they need more GPUs than the cluster given): "
                     + ", ".join(f"{c.name} ({c.gpus_needed} GPUs)" for c in more))
    return TuneResult(current, tuple(ranked), tuple(refused), start_res.workload, start_res.step_model,
                      tuple(notes), tuple(more))
