"""The host ledger of a Plan: its engine's rows (``Engine.host_ledger``) with the node's budget (its available memory
and its container's limit), once per Plan object.

A Plan is planned once and read many times (each host finding, check's JSON, the report, the watchdog): the ledger
is computed on the first ask and kept with the Plan it belongs to (a bounded memo keyed by the object; a Plan is
immutable, and the memo keeps it alive, so its id cannot be reused meanwhile). Planning alone never builds it: the
plan rate stays what planning costs (tests/test_plan_rate.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.hostmem import HostLedger, PhaseTotal
from kvplan.models.memo import Memo
from kvplan.result import Plan
from kvplan.units import GiB

_LEDGERS: Memo[tuple[Plan, HostLedger]] = Memo("host ledgers", 512)


def node_ledger(plan: Plan) -> HostLedger:
    """Every term the launch puts in one node's host memory, with the node's budget."""
    return _LEDGERS.get(id(plan), lambda: (plan, _build(plan)))[1]


def _build(plan: Plan) -> HostLedger:
    from kvplan.engines import get_engine

    n = plan.per_node
    return HostLedger(rows=get_engine(plan.engine).host_ledger(plan), available_bytes=n.host_available_bytes,
                      available_source=n.host_available_source, limit_bytes=n.container_limit_bytes,
                      limit_source=n.container_limit_source, others_bytes=n.host_others_bytes,
                      total_bytes=n.host_total_bytes)


NEAR_FULL = 0.90  # of the node's budget: above it, host-near-full (a warning)
_JUDGEMENTS: Memo[tuple[Plan, HostJudgement]] = Memo("host judgements", 512)


@dataclass(frozen=True)
class HostJudgement:
    """How the ledger's peak sits against the node, the one reading every host rule shares (one rule per question:
    host-oversubscribed the node's memory, container-memory-limit the cgroup, host-near-full the last 10 %)."""

    ledger: HostLedger
    peak: PhaseTotal
    over_node: bool  # the peak exceeds the node's available memory, or the pinned tiers its usable part
    over_limit: bool  # the peak exceeds the container's cgroup limit
    near_full: bool  # fits both, but the peak takes more than NEAR_FULL of the tighter budget

    def terms(self, n: int = 3) -> str:
        """The biggest terms of the peak phase, for a finding's message."""
        return self.ledger.named(self.peak.phase, n)


def judge(plan: Plan) -> HostJudgement:
    """The host rules' shared reading of ``plan`` (once per Plan object, like its ledger)."""
    return _JUDGEMENTS.get(id(plan), lambda: (plan, _judge(plan)))[1]


def _judge(plan: Plan) -> HostJudgement:
    led = node_ledger(plan)
    pk, n = led.peak, plan.per_node
    avail, limit = n.host_available_bytes, n.container_limit_bytes
    usable = n.host_usable_bytes
    over_node = avail is not None and (pk.bytes > avail or (usable is not None and n.host_kv_bytes > usable))
    over_limit = limit is not None and pk.bytes > limit
    budget = led.budget
    near = (not over_node and not over_limit and budget is not None and budget[0] > 0
            and pk.bytes > NEAR_FULL * budget[0])
    return HostJudgement(led, pk, over_node, over_limit, near)


def describe_peak(j: HostJudgement, against: str = "") -> str:
    """"steady peak 376.1 GiB (373.5–400.2)[ = 83.8 % of ...]: 8 × HiCache host pool 44.7 GiB = 357.6 GiB; ..."."""
    pk = j.peak
    return (f"{pk.phase} peak {pk.bytes / GiB:,.1f} GiB ({pk.low / GiB:,.1f}–{pk.high / GiB:,.1f}){against}, "
            f"biggest terms: {j.terms()}")
