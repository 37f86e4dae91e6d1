"""``kvplan cleanup``: what earlier launches of this user left, removed after confirmation (``--yes`` for scripts).

It acts only on proof of ownership (``launch.ownership``, ``launch.state``):

* a state file that passes the trust checks (this user's 0700 state directory, a regular 0600 file of this user,
  well-formed); a malformed or untrusted file is skipped with a warning, and one whose check fails for any other
  reason is reported and left as it is while the others are still cleaned (exit 1);
* whose kvplan is gone: the recorded (namespace, pid, start time) of the supervising kvplan names no live process.
  A launch whose kvplan still runs, in this PID namespace or any visible one, is left alone; so is a launch from a
  PID namespace this cleanup cannot see (a parent or sibling container): run cleanup there;
* then a process is stopped only when it runs under this uid, carries the launch's id and secret token in its
  environment, and either is one the launch recorded (same pid and start time in the launch's namespace) or
  descends from such a process;
* a /dev/shm segment is removed only when the launch recorded it by bare name with its device and inode, it is a
  regular file of this user with one link directly in the shm directory, and no visible process maps or holds it
  (``shm``);
* a state file is removed only when none of the processes it recorded still runs (proven the launch's or not: a
  later cleanup still knows them) and it is the file that was read, with one link (``state.removal_problem``).

Everything else is reported, never touched: orphaned engine ranks (``sglang::``/``VLLM::`` titles re-parented to
pid 1: the usual container launcher is pid 1 too), processes with a launch marker but no proof, GPU memory
holders, engine-looking segments no launch recorded.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field

from kvplan.launch import ownership, procs, shm, state
from kvplan.units import MiB


def _engine_rank(title: str) -> bool:
    """A process titled like an engine's rank (``Engine.process_titles``: ``sglang::scheduler``, ``VLLM::Worker``)."""
    from kvplan.engines import all_engines

    return title.startswith(tuple(t for e in all_engines() for t in e.process_titles))


@dataclass
class Group:
    """One launch whose kvplan is gone: what may be stopped and removed."""

    title: str
    record: state.Record
    processes: list[procs.ProcStat] = field(default_factory=list)
    shm: list[state.Segment] = field(default_factory=list)


@dataclass
class Findings:
    groups: list[Group] = field(default_factory=list)
    active: list[str] = field(default_factory=list)  # launches left alone
    reports: list[str] = field(default_factory=list)  # seen, not touched
    warnings: list[str] = field(default_factory=list)  # state files / directories ignored
    stale_records: list[state.Record] = field(default_factory=list)  # nothing left: only the file goes
    gpu: dict[int, int] = field(default_factory=dict)  # pid -> GPU bytes
    failed: list[str] = field(default_factory=list)  # state files that could not be checked: left as they are

    def empty(self) -> bool:
        return not self.groups and not self.stale_records


def _gpu_holders() -> dict[int, int]:
    from kvplan.launch.gpu import GpuProbe

    probe = GpuProbe()
    held: dict[int, int] = {}
    try:
        for g in probe.sample() if probe.ok else []:
            for pid, b in g.pids.items():
                held[pid] = held.get(pid, 0) + b
    finally:
        probe.close()
    return held


def _kvplan_state(rec: state.Record, view: ownership.ProcView) -> str:
    """``alive``, ``gone`` or ``unknown`` (its PID namespace is not visible from here)."""
    if not view.sees_ns(rec.ns):
        return "unknown"
    pid = view.visible_pid(rec.ns, rec.kvplan_pid)
    st = procs.read_stat(pid) if pid else None
    return "alive" if st and not st.zombie and st.start == rec.kvplan_start else "gone"


def _proven(rec: state.Record, view: ownership.ProcView, stats: dict[int, procs.ProcStat],
            markers: dict[int, tuple[str, str]]) -> tuple[set[int], list[str]]:
    """Visible pids proven to be the launch's (see the module docstring), and notes on what was not."""
    import secrets

    recorded = set(rec.processes)
    marked = {p for p, (lid, sha) in markers.items() if lid == rec.id and secrets.compare_digest(sha, rec.token_sha256)}
    roots = set()
    notes = []
    for p in marked:
        ns, inner = view.inner(p)
        if ns == rec.ns and inner is not None and (inner, stats[p].start) in recorded:
            roots.add(p)
    mine, changed = set(roots), True
    while changed:  # descendants that still carry the secret
        changed = False
        for p in marked - mine:
            if stats[p].ppid in mine:
                mine.add(p)
                changed = True
    for p in sorted(marked - mine):
        notes.append(f"  process {p} carries the marker of launch {rec.id} but was never recorded by it: not "
                     f"touched ({procs.cmdline(p, 80)})")
    for inner, start in sorted(recorded):
        vp = view.visible_pid(rec.ns, inner)
        st = stats.get(vp) if vp else None
        if vp is not None and st and st.start == start and vp not in mine and not st.zombie:
            notes.append(f"  process {vp} was recorded by launch {rec.id} but does not carry its secret (a cleared "
                         f"environment, or another uid): not touched ({procs.cmdline(vp, 80)})")
    return mine, notes


def recorded_alive(rec: state.Record, view: ownership.ProcView) -> list[int]:
    """Visible pids of the processes *rec* recorded that still run (same pid and start time, not defunct): while one
    does, its state file stays, whether or not it is proven the launch's."""
    out = []
    for inner, start in rec.processes:
        vp = view.visible_pid(rec.ns, inner)
        st = procs.read_stat(vp) if vp else None
        if vp and st and st.start == start and not st.zombie:
            out.append(vp)
    return sorted(out)


def collect(min_age: float = 60.0) -> Findings:
    me = os.getpid()
    f = Findings(gpu=_gpu_holders())
    records, f.warnings = state.load_all()
    view = ownership.ProcView()
    stats = {p: st for p in view.procs if p != me and (st := procs.read_stat(p)) is not None}
    markers = {p: m for p in stats if (m := ownership.marker(p)) is not None}
    claimed: set[int] = set()
    my_shm = os.path.realpath(shm.shm_dir())
    for rec in records:
        try:
            claimed |= _collect_one(f, rec, view, stats, markers, claimed, my_shm)
        except Exception as e:  # noqa: BLE001 - one bad state file must not stop the cleanup of the others
            f.failed.append(f"state file {rec.path} of launch {rec.id} could not be checked ({type(e).__name__}: "
                            f"{str(e)[:200]}): left as it is, nothing of it touched")
    for p, st in sorted(stats.items()):
        if p in claimed or st.ppid != 1 or not _engine_rank(procs.cmdline(p)):
            continue
        held = f.gpu.get(p, 0)
        f.reports.append(f"engine rank {p} ({procs.cmdline(p, 60)}) has parent pid 1"
                         + (f" and holds {held / MiB:,.0f} MiB of GPU memory" if held else "")
                         + ": not touched (a container launcher is pid 1 too); if it is an orphan of yours, "
                         f"stop it with: kill {p}")
    known = {r.id for r in records}
    for p, (lid, _sha) in sorted(markers.items()):
        if p not in claimed and lid not in known:
            f.reports.append(f"process {p} carries the marker of launch {lid[:40]}, which has no state file here: "
                             f"not touched ({procs.cmdline(p, 80)})")
    for p, b in sorted(f.gpu.items()):
        if p not in claimed:
            f.reports.append(f"pid {p} holds {b / MiB:,.0f} MiB of GPU memory and is no kvplan launch's "
                             f"({procs.cmdline(p, 80)}): not touched")
    listed = {os.path.join(my_shm, s.name) for g in f.groups for s in g.shm}
    for path, size, age in shm.stale_segments(my_shm, min_age_s=min_age):
        if path not in listed:
            f.reports.append(f"segment {path} ({size / MiB:,.1f} MiB, unused, {age / 60:,.0f} min old) looks like "
                             f"an engine's leftover but no kvplan launch recorded it: not touched (rm it if yours)")
    return f


def _collect_one(f: Findings, rec: state.Record, view: ownership.ProcView, stats: dict[int, procs.ProcStat],
                 markers: dict[int, tuple[str, str]], claimed: set[int], my_shm: str) -> set[int]:
    """Sort one launch's state file into *f*; returns the pids it claims."""
    where = state.state_dir() / rec.path.name
    kv = _kvplan_state(rec, view)
    if kv == "alive":
        f.active.append(f"launch {rec.id} is running (its kvplan runs): left alone")
        return set()
    if kv == "unknown":
        f.active.append(f"launch {rec.id} ran in a PID namespace this cleanup cannot see (pid:[{rec.ns}]): "
                        "left alone; run kvplan cleanup there (or remove the state file if that namespace is gone)")
        return set()
    mine, notes = _proven(rec, view, stats, markers)
    mine -= claimed
    f.reports.extend(notes)
    segs: list[state.Segment] = []
    in_use = False
    if rec.shm and os.path.realpath(rec.shm_dir or "/dev/shm") != my_shm:
        f.reports.append(f"  launch {rec.id} recorded segments in {rec.shm_dir}, not in {my_shm}: not touched")
    else:
        pids = [p for p in view.procs if p not in mine]  # the launch's own users are stopped first
        for seg in rec.shm:
            outcome, detail = shm.remove_segment(my_shm, seg.name, seg.ino, seg.dev, pids, dry_run=True)
            if outcome == "removable":
                segs.append(seg)
            elif outcome == "kept":
                in_use |= detail.startswith("still mapped")
                f.reports.append(f"  {os.path.join(my_shm, seg.name)} (recorded by launch {rec.id}): {detail}: "
                                 "not touched")
    running = [p for p in recorded_alive(rec, view) if p not in mine]
    keep = _keep_reason(rec, running)
    if keep:
        f.reports.append(f"  state file {where}: kept, {keep}")
    if not mine and not segs:
        if not in_use and not keep:  # a segment still in use keeps its record, for a later cleanup
            f.stale_records.append(rec)
        return mine
    f.groups.append(Group(f"launch {rec.id} (state file {where}; its kvplan is gone)", rec,
                          [stats[p] for p in sorted(mine)], segs))
    return mine


def _keep_reason(rec: state.Record, running: list[int]) -> str | None:
    """Why the state file of *rec* stays once the cleanup is done (None: it goes)."""
    if running:
        return (f"process {', '.join(map(str, running[:5]))} it recorded still runs (a later cleanup still knows "
                "it)")
    return state.removal_problem(rec)


def stop_processes(targets: list[procs.ProcStat], grace: float = 3.0, kill_wait: float = 5.0
                   ) -> tuple[list[procs.ProcStat], list[procs.ProcStat]]:
    """SIGTERM *targets* (same pid and start time only), wait *grace*, SIGKILL the rest.

    Returns (survivors, refused): processes still alive, and those the kernel refused to signal (EPERM)."""
    refused: dict[int, procs.ProcStat] = {}

    def live() -> list[procs.ProcStat]:
        out = []
        for t in targets:
            st = procs.read_stat(t.pid)
            if st and st.start == t.start and not st.zombie:
                out.append(st)
        return out

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        for st in live():
            try:
                os.kill(st.pid, sig)
            except ProcessLookupError:
                pass
            except PermissionError:
                refused[st.pid] = st
        deadline = time.monotonic() + wait
        while [s for s in live() if s.pid not in refused] and time.monotonic() < deadline:
            time.sleep(0.05)
        if not live():
            break
    left = live()
    return [s for s in left if s.pid not in refused], [s for s in left if s.pid in refused]


def _print(f: Findings) -> None:
    for line in f.warnings:
        print(f"warning: {line}")
    for line in f.active:
        print(line)
    for g in f.groups:
        print(g.title)
        for st in g.processes:
            z = " (defunct)" if st.zombie else ""
            gpu = f", GPU {f.gpu[st.pid] / MiB:,.0f} MiB" if st.pid in f.gpu else ""
            print(f"  process {st.pid}{z}{gpu}: {procs.cmdline(st.pid, 100) or st.comm}")
        for s in g.shm:
            print(f"  /dev/shm segment {os.path.join(shm.shm_dir(), s.name)}")
    for rec in f.stale_records:
        print(f"state file {rec.path} of launch {rec.id}: its kvplan is gone and nothing of it is left")
    for line in f.reports:
        print(line)
    for line in f.failed:
        print(f"error: {line}")


def run(yes: bool = False, dry_run: bool = False, min_age: float = 60.0) -> int:
    """0 when nothing is left (or nothing was found), 1 when declined or something could not be removed (a state file
    that could not be checked included)."""
    f = collect(min_age)
    _print(f)
    if f.empty():
        print("nothing to clean up")
        return 1 if f.failed and not dry_run else 0
    if dry_run:
        print("dry run: nothing stopped or removed")
        return 0
    if not yes:
        if not sys.stdin.isatty():
            print("not removed: no terminal to confirm on; pass --yes")
            return 1
        if input("stop and remove the launches above? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return 1
    failed: list[str] = [f"{len(f.failed)} state file(s) could not be checked"] if f.failed else []
    targets = [st for g in f.groups for st in g.processes]
    survivors, refused = stop_processes(targets)
    failed += [f"process {st.pid} survived SIGKILL" for st in survivors]
    failed += [f"process {st.pid}: permission denied (not yours to signal)" for st in refused]
    left = {st.pid for st in survivors + refused}
    n_shm = 0
    for g in f.groups:
        for seg in g.shm:
            outcome, detail = shm.remove_segment(shm.shm_dir(), seg.name, seg.ino, seg.dev)
            if outcome == "removed":
                n_shm += 1
            elif outcome in ("kept", "failed"):
                failed.append(f"{os.path.join(shm.shm_dir(), seg.name)}: {detail}")
    view = ownership.ProcView()  # after the stops: a record goes only when none of its processes runs
    n_files = 0
    for rec in [g.record for g in f.groups if not any(st.pid in left for st in g.processes)] + f.stale_records:
        why = _keep_reason(rec, recorded_alive(rec, view)) or state.remove_record(rec)
        if why is None:
            n_files += rec in f.stale_records
        else:
            print(f"state file {rec.path}: kept, {why}")
    print(f"stopped {len(targets) - len(left)} process(es), removed {n_shm} segment(s)"
          + (f" and {n_files} stale state file(s)" if n_files else "")
          + ("" if not failed else "; FAILED: " + "; ".join(failed)))
    return 1 if failed else 0
