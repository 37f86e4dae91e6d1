"""``kvplan tune``: the levers ``check`` knows, each a new Plan of a rewritten command, simulated on the same workload.

1. The current launch is simulated first (its result also tells the levers the running batch to aim at).
2. The engine's launch levers (``Engine.levers``, as diagnose prices them: only where check finds them safe; see
   simulate/engine_levers.py) and its scheduler levers (simulate/policy/<engine>_levers.py) are rewritten into the
   command and planned by ``kvplan check``; a candidate that is not check-safe (an error finding, or one of the
   engine's ``headroom_findings``, SGLang's gpu-headroom-low) is refused (and, within a group such as the
   static-fraction steps, so are the larger steps after it). A candidate on more GPUs than the cluster given says how
   many it needs (``gpus_needed``).
3. The best lever of each group that beats the current launch is combined pairwise with the others (not two levers
   setting the same flag).
Candidates are ranked by predicted steady-state generation throughput, then by p99 end-to-end latency.
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
    kv_tokens: int | None = None  # per scheduler instance
    gpus_needed: int | None = None  # GPUs it runs on when that is more than the cluster given has

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
                "gpus_needed": self.gpus_needed,
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

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "workload": self.workload, "step_model": self.step_model,
                "current": self.current.to_dict(), "ranked": [c.to_dict() for c in self.ranked],
                "refused": [c.to_dict() for c in self.refused], "notes": list(self.notes)}


def _errors(check_result: Any, more_gpus: bool = False) -> tuple[list[str], list[str]]:
    """(what makes the candidate not check-safe: errors and the engine's headroom findings; the other warnings).
    ``more_gpus``: the candidate is reported with the GPUs it needs, so the engine's placement errors (more ranks
    than a node of the given cluster has) are that statement, not a refusal."""
    from kvplan.engines import get_engine

    eng = get_engine(check_result.plan.engine)
    headroom = eng.headroom_findings
    placement = eng.placement_findings if more_gpus else ()
    errs = [f"{f.id}: {f.message}" for f in check_result.findings
            if (f.severity == "error" and f.id not in placement) or (f.severity == "warning" and f.id in headroom)]
    warns = [f.id for f in check_result.findings if f.severity == "warning" and f.id not in headroom]
    return errs, warns


def _gpus_needed(plan: Any, base: Any) -> int | None:
    """GPUs ``plan`` runs on, when more than the base launch's cluster has (given, detected, or the base launch's
    own GPUs: a cluster not given is taken to be what the launch runs on)."""
    need = plan.per_replica.ranks * max(1, plan.per_replica.replicas)
    return need if need > base.cluster.gpus_per_node * base.cluster.nodes else None


def tune(base: LaunchInputs, simulate: Callable[[LaunchInputs], SimResult],
         progress: Callable[[str, int], None] | None = None) -> TuneResult:
    """``simulate(inputs)`` runs the workload on a launch with its step model; ``progress(name, total)``."""
    from kvplan.simulate.engine_levers import engine_levers
    from kvplan.simulate.policy import policy_for

    pol = policy_for(base.engine)
    tick = progress or (lambda name, total: None)
    cur_res = simulate(base)
    current = Candidate("current", {}, base.command, "the launch as given", cur_res,
                        warnings=tuple(f.id for f in base.findings if f.severity == "warning"),
                        kv_tokens=base.kv_tokens)
    series = cur_res.series
    hint = {"running_mean": cur_res.running_mean,  # the series' points are means over their bins: whole requests up
            "running_max": math.ceil(max((p["running"] or 0) for p in series)) if series else None,
            "inflight_max": math.ceil(max((p["running"] or 0) + (p["queued"] or 0) for p in series))
            if series else None}
    skipped: list[str] = []
    singles: list[Lever] = [*engine_levers(base, hint, skipped), *pol.levers(base, hint)]
    total = len(singles) + 3
    ok: list[tuple[Lever, Candidate]] = []
    refused: list[Candidate] = []
    stopped: set[str] = set()

    def run(lv: Lever) -> Candidate:
        tick(lv.name, total)
        try:
            inputs, chk = rewrite(base, lv.flags)
        except Exception as e:  # noqa: BLE001 - a lever the engine model cannot plan is reported, not fatal
            return Candidate(lv.name, lv.flags, None, lv.note, refused=f"cannot plan: {e}")
        gpus = _gpus_needed(chk.plan, base.plan)
        errs, warns = _errors(chk, more_gpus=gpus is not None)
        if errs:
            return Candidate(lv.name, lv.flags, inputs.command, lv.note, refused=errs[0], warnings=tuple(warns),
                             kv_tokens=inputs.kv_tokens, gpus_needed=gpus)
        return Candidate(lv.name, lv.flags, inputs.command, lv.note, simulate(inputs), warnings=tuple(warns),
                         kv_tokens=inputs.kv_tokens, gpus_needed=gpus)

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
        if lv.combinable and c.tps > current.tps and (lv.group not in best or c.tps > best[lv.group][1].tps):
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
    cands = [c for _, c in ok]
    ranked = sorted(cands, key=lambda c: (-c.tps, c.p99_e2e_s if c.p99_e2e_s is not None else float("inf")))
    return TuneResult(current, tuple(ranked), tuple(refused), cur_res.workload, cur_res.step_model,
                      tuple(f"lever not tried: {s}" for s in skipped))
