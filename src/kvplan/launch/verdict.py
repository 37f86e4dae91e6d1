"""The diagnosis after an abort: which phase, which signal, the numbers (with units and scope), the plan's likely
cause and the fix. The cause comes from the preflight's findings when one matches the abort reason, else from the
plan itself (e.g. a vLLM-CPU KV cache, which lives in host memory), else from the reason alone."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field

from kvplan.launch.procs import ProcStat
from kvplan.launch.watchdog import Abort
from kvplan.units import GiB

RELATED = {
    "host-memory": ("host-oversubscribed", "host-check-blind", "shm-too-small", "unmodeled-memory"),
    "stall": ("host-oversubscribed", "host-check-blind", "unmodeled-memory"),
    "gpu-memory": ("kv-pool-empty", "gpu-headroom-low", "gpu-util-startup-fail", "max-model-len-unfit"),
    "rank-died": ("gpu-headroom-low", "kv-pool-empty", "shm-too-small", "host-oversubscribed"),
    "ready-timeout": ("host-oversubscribed", "gpu-headroom-low", "gpu-util-startup-fail", "kv-pool-empty"),
}
GENERIC = {
    "host-memory": ("the launch needed more host memory than it may use, and the plan does not account for it",
                    "shrink the host-side pools (HiCache / KV offloading / CPU KV cache), or raise --host-budget-gib "
                    "if the host really has the room"),
    "stall": ("a silent allocation (pinning a large host pool) or a hang while memory kept growing",
              "shrink the host-side pools, or raise --stall-timeout if this phase is known to be slow and silent"),
    "gpu-memory": ("the GPU pools leave too little free memory", "lower --mem-fraction-static (SGLang) or "
                   "--gpu-memory-utilization (vLLM)"),
    "rank-died": ("a rank process died (often the OOM killer or a crash); its peers would wait on it forever",
                  "look at the log lines before the death and at `dmesg | grep -i -e oom -e killed`"),
    "ready-timeout": ("the server did not answer in time", "if the last phase was still progressing, raise "
                      "--ready-timeout; else read the log tail"),
}


@dataclass
class PhaseRecord:
    name: str
    t: float
    tree_bytes: int
    host_available: int


@dataclass
class Outcome:
    code: int
    by: str  # server | abort | request | error
    server_code: int | None = None
    abort: Abort | None = None
    abort_phase: str | None = None
    abort_t: float | None = None
    phases: list[PhaseRecord] = field(default_factory=list)
    ready_t: float | None = None
    ready_url: str | None = None
    survivors: list[ProcStat] = field(default_factory=list)
    killed: int = 0
    shm_removed: list[str] = field(default_factory=list)
    shm_failed: list[str] = field(default_factory=list)
    shm_unattributed: list[str] = field(default_factory=list)
    peak_tree: int = 0
    duration: float = 0.0
    stop_s: float = 0.0  # from the decision to stop until nothing was left
    curve: list[tuple[float, int, int]] = field(default_factory=list)  # (t, launch bytes, host available)
    last_lines: list[str] = field(default_factory=list)
    log_path: str = ""
    launch_id: str = ""
    error: str | None = None


@dataclass
class Diagnosis:
    headline: str
    rows: list[tuple[str, str]] = field(default_factory=list)  # (label, text)
    fix: list[str] = field(default_factory=list)
    suggested_command: str | None = None
    log_tail: list[str] = field(default_factory=list)


def _g(n: float) -> str:
    return f"{n / GiB:,.2f} GiB"


def _phase_row(out) -> str:
    starts = {p.name: p.t for p in out.phases}
    began = starts.get(out.abort_phase, 0.0)
    return f"{out.abort_phase} ({out.abort_t:.1f} s after the start; this phase began at {began:.1f} s)"


def _cpu_kv(out, res, limits) -> tuple[str, list[str], str | None] | None:
    """A KV cache in host memory (vLLM on CPU): size what fits from what the launch held before the KV pool."""
    from kvplan.engines import get_engine

    plan = res.plan
    engine = get_engine(plan.engine)
    where = engine.kv_cache_on_host(plan)
    if where is None or not plan.per_rank.kv_pool_bytes:
        return None
    ranks = max(1, plan.per_node.ranks)
    kv = plan.per_rank.kv_pool_bytes * ranks
    before = next((p.tree_bytes for p in out.phases if p.name == "kv_pool"), None)
    cause = (f"the plan puts the KV cache in host memory ({where[0]}): {_g(plan.per_rank.kv_pool_bytes)} per "
             f"rank x {ranks} rank(s) = {_g(kv)} on this node ({where[1]})")
    if before is None:
        return cause, [], None
    limit = limits.host_budget
    if limit is None:
        avail = next((p.host_available for p in out.phases if p.name == "kv_pool"), 0)
        limit = before + avail - limits.host_reserve
    cause += f"; the launch held {_g(before)} before the KV pool, so it needs about {_g(before + kv)}"
    fits = math.floor((limit - before) / ranks / GiB)
    if fits < 1:
        return cause, [f"no whole GiB of KV cache fits next to the {_g(before)} the launch holds before it"], None
    fix, cmd = engine.resize_kv_cache_on_host(plan, fits)
    return cause, [f"{fix}: {_g(fits * GiB)} per rank fits"], cmd


def expected_line(led) -> str:
    """What the plan's host ledger expects of this node (kvplan.hostmem.HostLedger), for the preflight and the
    diagnosis: the loading and steady totals with their ranges, and the time to pin. The launch's own memory as the
    watchdog samples it (private RSS + its /dev/shm) is the part of the node's total this launch holds."""
    parts = []
    for ph in ("loading", "steady"):
        t = led.total(ph)
        parts.append(f"{ph} {_g(t.bytes)} ({t.low / GiB:,.1f}–{t.high / GiB:,.1f} GiB)")
    line = "the plan's host ledger expects " + ", ".join(parts) + " on this node"
    if led.pinned_bytes:
        s, fast, slow = led.pin_seconds()
        line += f"; pinning {led.pinned_bytes / 1e9:,.0f} GB takes about {s:,.0f} s ({fast:,.0f}–{slow:,.0f} s)"
    return line


def diagnose(out: Outcome, res, limits) -> Diagnosis | None:
    """*out*: the supervisor's Outcome; *res*: the preflight CheckResult or None; *limits*: watchdog.Limits."""
    if out.abort is None:
        return None
    a = out.abort
    d = Diagnosis(f"kvplan aborted the launch: {a.reason}")
    d.rows.append(("phase", _phase_row(out)))
    d.rows.append(("signal", f"{a.signal}: {a.message}"))
    nums = [f"launch peak {_g(out.peak_tree)} (private RSS of its processes + its /dev/shm)"]
    if "host_available_bytes" in a.numbers:
        nums.append(f"host available {_g(a.numbers['host_available_bytes'])} (this node), reserve "
                    f"{_g(limits.host_reserve)}")
    if limits.host_budget is not None:
        nums.append(f"budget {_g(limits.host_budget)} (this launch)")
    if res is not None and res.host_ledger is not None:
        nums.append(expected_line(res.host_ledger))
    d.rows.append(("numbers", "; ".join(nums)))
    d.rows.append(("stopped", f"{out.killed} process(es) in {out.stop_s:.2f} s; "
                   + ("nothing left" if not out.survivors else f"LEFT: {[p.pid for p in out.survivors]}")
                   + (f"; removed {len(out.shm_removed)} /dev/shm segment(s)" if out.shm_removed else "")))
    related = []
    if res is not None:
        related = [f for f in res.findings if f.id in RELATED.get(a.reason, ()) and f.severity != "info"]
    # a KV cache in host memory sized from what the launch really held first beats a finding's general advice
    derived = _cpu_kv(out, res, limits) if res is not None and a.reason in ("host-memory", "stall") else None
    if related and not (derived and derived[2]):
        for f in related:
            d.rows.append(("likely cause", f"[{f.id}] {f.message}"))
            d.fix.append(f.fix)
        d.suggested_command = res.suggested_command
    elif derived:
        cause, fixes, cmd = derived
        d.rows.append(("likely cause", cause))
        d.fix.extend(fixes)
        d.suggested_command = cmd
    else:
        cause, fix = GENERIC[a.reason]
        if res is None:
            cause += " (no plan: the command was not checked)"
        d.rows.append(("likely cause", cause))
        d.fix.append(fix)
    d.log_tail = out.last_lines[-5:]
    return d


def quote(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
