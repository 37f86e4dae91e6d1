"""One evaluation of a launch: its Plan, its findings and its repaired launch, computed in one place and asked by
every command (check, plan, explain, diagnose, tune, simulate, serve).

``evaluate(command, options)`` plans the command with its engine's model, runs every finding rule on the Plan and,
on demand, builds check's suggested command (``kvplan.suggest``: the error and warning findings' fixes applied,
re-checked until no error is left). Two derived launches follow from it, each itself an Evaluation:

* ``repaired``: the launch the next step starts from. The launch itself when it has no error finding; else the
  suggested command (every error's fix applied, as ``check`` prints it); None when no fix passes its own check.
* ``rewrite(flags)``: the launch with some flags set or removed, evaluated like any launch. A diagnose lever, a tune
  candidate and a suggested command are each one of these, never a second formula.

``unsafe()`` is the one safety rule for a what-if: its first error finding, or one of the engine's
``headroom_findings`` (SGLang's gpu-headroom-low); ``placement_only()`` says when its only errors are the engine's
``placement_findings`` (it needs more GPUs per node than the cluster given has).

Evaluations made from one another share a cache (``_Family``): the same command text is planned and checked once,
and the filesystem (is the model a local directory, is it in the HF cache, is a checkpoint at hand) is read once
(``models.paths.view``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError
from kvplan.result import CheckResult, Finding, Plan

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines import Engine, LaunchCommand
    from kvplan.options import PlanOptions
    from kvplan.suggest import Suggestion

MAX_FAMILY = 512  # evaluations one family keeps (a tune run makes a few dozen; memory stays bounded)


@dataclass
class _Family:
    """The engine, the options and the caches shared by an evaluation and every rewrite of it."""

    engine: Engine
    options: PlanOptions
    evaluations: dict[str, Evaluation] = field(default_factory=dict)
    plans: dict[tuple[str, str], Plan] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)  # the filesystem as the family sees it (models.paths.view)

    def evaluate(self, cmd: LaunchCommand) -> Evaluation:
        from kvplan.models.paths import view

        text = cmd.text()
        ev = self.evaluations.get(text)
        if ev is None:
            if len(self.evaluations) >= MAX_FAMILY:
                self.evaluations.clear()
                self.plans.clear()
                self.stats.clear()
            with view(self.stats):
                plan = _plan(self.engine, cmd, self.options)
                ev = Evaluation(self, cmd, plan, ())
                ev.findings = tuple(_run_rules(plan, ev.replan))
            self.evaluations[text] = ev
        return ev


def _plan(engine: Engine, cmd: LaunchCommand, opts: PlanOptions) -> Plan:
    """The engine's plan of ``cmd`` with the model's own notes first in its assumptions. A value the engine version's
    own argparse refuses too is planned without the flags it would reject (the Plan keeps the original command so the
    flag findings see what was given)."""
    try:
        p = engine.plan(cmd, opts)
    except KvplanError as e:
        kept = engine.without_rejected(cmd, opts.engine_version or engine.default_version()[0])
        if kept is None:
            raise
        try:
            p = engine.plan(kept, opts)
        except KvplanError:
            raise e from None
        p = replace(p, command=cmd.text())
    notes = tuple(n for n in p.model.notes if n not in p.assumptions)
    return replace(p, assumptions=(*notes, *p.assumptions)) if notes else p


def _run_rules(plan: Plan, replan: Any) -> list[Finding]:
    from kvplan.findings import Context, run_rules

    return run_rules(Context(plan, replan))


@dataclass(eq=False)
class Evaluation:
    """One launch, planned and checked. Build it with ``evaluate``; derive others with ``rewrite`` / ``repaired``."""

    family: _Family = field(repr=False)
    cmd: LaunchCommand
    plan: Plan
    findings: tuple[Finding, ...]

    # ---- what it is ----
    @property
    def engine(self) -> Engine:
        return self.family.engine

    @property
    def options(self) -> PlanOptions:
        return self.family.options

    @property
    def text(self) -> str:
        return self.cmd.text()

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def verdict(self) -> str:
        sev = {f.severity for f in self.findings}
        return "fail" if "error" in sev else "warn" if "warning" in sev else "ok"

    def labels(self, severities: Sequence[str] = ("error", "warning")) -> list[str]:
        """"id (severity)" of the findings of these severities, in report order."""
        return [f"{f.id} ({f.severity})" for f in self.findings if f.severity in severities]

    # ---- what-ifs ----
    def replan(self, **changes: Any) -> Plan:
        """The same launch with parsed-args fields changed (what finding rules ask for), memoized per family."""
        from kvplan.models.paths import view

        key = (self.text, repr(sorted(changes.items())))
        p = self.family.plans.get(key)
        if p is None:
            with view(self.family.stats):
                p = self.family.plans[key] = self.engine.replan(self.cmd, self.options, **changes)
        return p

    def other(self, command: Sequence[str] | str) -> Evaluation:
        """Another launch of the same engine with the same options (the caches are shared)."""
        from kvplan.engines import split_command

        cmd = split_command(command)
        if not self.engine.matches(cmd):
            from kvplan.engines import detect_engine

            return _Family(detect_engine(cmd), self.options).evaluate(cmd)
        return self.family.evaluate(cmd)

    def rewrite(self, flags: dict[str, str | None]) -> Evaluation:
        """The launch with ``flags`` set (``""``: a boolean flag) or removed (None), evaluated like any launch."""
        from kvplan.engines import split_command

        if not flags:
            return self
        return self.family.evaluate(split_command(self.engine.rewrite(self.cmd, flags)))

    def unsafe(self) -> str | None:
        """"id (severity)" of the first finding that makes this launch unsafe to offer: an error, or one of the
        engine's ``headroom_findings``; None when check finds it safe."""
        for f in self.findings:
            if f.severity == "error" or (f.severity == "warning" and f.id in self.engine.headroom_findings):
                return f"{f.id} ({f.severity})"
        return None

    def placement_only(self) -> bool:
        """Its only errors say it needs more GPUs per node than the cluster given has (engine placement_findings)."""
        errs = self.errors
        return bool(errs) and all(f.id in self.engine.placement_findings for f in errs)

    # ---- the suggested command and the repaired launch ----
    @cached_property
    def suggestion(self) -> Suggestion:
        from kvplan.engines import split_command
        from kvplan.suggest import suggest

        def recheck(text: str) -> tuple[Plan, tuple[Finding, ...]]:
            ev = self.family.evaluate(split_command(text))
            return ev.plan, ev.findings

        return suggest(self.findings, lambda flags: self.engine.rewrite(self.cmd, flags), recheck)

    @cached_property
    def repaired(self) -> Evaluation | None:
        """This launch when it has no error finding; else its suggested command (every error's fix applied, re-checked
        until none is left); None when no fixed command passes its own check."""
        if not self.errors:
            return self
        from kvplan.engines import split_command

        cmd = self.suggestion.command
        return self.family.evaluate(split_command(cmd)) if cmd else None

    def repair_note(self) -> str:
        """"fails (ids) → repaired: <command>" or why it cannot be repaired ("" when it has no error)."""
        if not self.errors:
            return ""
        ids = ", ".join(dict.fromkeys(f.id for f in self.errors))
        rep = self.repaired
        if rep is None:
            return f"fails ({ids}); no fixed command passes its own check: {self.suggestion.note or 'no fix known'}"
        return f"fails ({ids}) → repaired: {rep.text}"

    @property
    def result(self) -> CheckResult:
        """What ``kvplan check`` returns for this launch (``result.to_dict()`` is check's JSON)."""
        from kvplan.ledger import node_ledger

        s = self.suggestion
        return CheckResult(plan=self.plan, findings=self.findings, suggested_command=s.command,
                           suggested_plan=s.plan, suggested_findings=s.findings, suggestion_note=s.note,
                           host_ledger=node_ledger(self.plan))


def evaluate(command: Sequence[str] | str | LaunchCommand, options: PlanOptions) -> Evaluation:
    """Plan and check a launch command (its text exactly as the user runs it) with typed options."""
    from kvplan.engines import LaunchCommand, detect_engine, split_command

    cmd = command if isinstance(command, LaunchCommand) else split_command(command)
    return _Family(detect_engine(cmd), options).evaluate(cmd)


def anchored_tokens(engine: Engine, plan: Plan, anchor: Plan, observed_tokens: int | None) -> int:
    """Tokens of one pool of ``plan`` as ``engine``'s log counts them, anchored on the pool a server reported for the
    launch ``anchor`` it ran (None: the plan's own figure). The plan's error for the anchor launch, in bytes per rank,
    carries over: ``plan + (observed - plan(anchor)) × cell(anchor) / cell(plan)``; with an unchanged cell,
    ``observed + plan - plan(anchor)`` (SGLang 0.85 -> 0.88 adds exactly 3 % of the free-memory baseline P divided by
    the bytes per token)."""
    mine = engine.logged_kv_tokens(plan)
    if observed_tokens is None:
        return mine
    ratio = anchor.per_rank.kv_bytes_per_token / max(1, plan.per_rank.kv_bytes_per_token)
    return max(0, round(mine + (observed_tokens - engine.logged_kv_tokens(anchor)) * ratio))


@dataclass
class WhatIfs:
    """The ``LeverInputs`` (kvplan.engines.levers) of a launch: the levers rewrite ``base`` (check's repaired launch)
    and each rewrite is an Evaluation of the family; what the server (or its simulation) showed sizes some of them."""

    base: Evaluation
    host_known: bool
    graph_gib: float | None = None  # CUDA-graph memory per rank a log showed
    running_max_seen: int | None = None
    inflight_max_seen: int | None = None

    @property
    def current(self) -> Plan:
        return self.base.plan

    @property
    def cmd(self) -> LaunchCommand:
        return self.base.cmd

    @property
    def running_max(self) -> int | None:
        return self.running_max_seen

    @property
    def inflight_max(self) -> int | None:
        return self.inflight_max_seen

    def plan_of(self, flags: dict[str, str | None]) -> Plan:
        return self.base.rewrite(flags).plan

    def unsafe(self, flags: dict[str, str | None]) -> str | None:
        return self.base.rewrite(flags).unsafe()
