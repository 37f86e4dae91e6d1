"""``kvplan cleanup``: what earlier launches left, removed after confirmation (``--yes`` for scripts).

A process is touched only when it is tied to an engine launch:

* a launch state file whose kvplan is gone: the processes carrying its ``KVPLAN_LAUNCH_ID`` marker, the processes of
  its session (started after its root), their descendants, and the /dev/shm segments it recorded;
* the marker alone (state file elsewhere or lost): the kvplan named by ``KVPLAN_LAUNCH_OWNER`` is gone;
* an orphaned engine rank: a process titled ``sglang::...`` or ``VLLM::...`` (the titles the engines give their
  scheduler / EngineCore / worker processes) whose parent is gone (re-parented to pid 1), with its descendants.
  NVML shows which of them hold GPU memory.

Launches whose kvplan still runs are active and left alone. Other processes holding GPU memory are listed, never
touched. Stale segments: engine-pattern files in /dev/shm that no live process maps or holds open and that are
older than ``--min-age``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kvplan.launch import procs, shm, state
from kvplan.units import MiB


def _engine_rank(title: str) -> bool:
    """A process titled like an engine's rank (``Engine.process_titles``: ``sglang::scheduler``, ``VLLM::Worker``)."""
    from kvplan.engines import all_engines

    return title.startswith(tuple(t for e in all_engines() for t in e.process_titles))


def marked_processes() -> dict[int, tuple[str, str | None, procs.ProcStat]]:
    """Every process carrying a launch marker: pid -> (launch id, owner tag, stat)."""
    out = {}
    for pid in procs.pids():
        if pid == os.getpid():
            continue
        lid = procs.environ_value(pid)
        st = procs.read_stat(pid) if lid else None
        if lid and st:
            out[pid] = (lid, procs.environ_value(pid, procs.OWNER), st)
    return out


def stop_processes(targets: list[procs.ProcStat], grace: float = 3.0, kill_wait: float = 5.0) -> list[procs.ProcStat]:
    """SIGTERM *targets* (same pid and start time only), wait *grace*, SIGKILL the rest; returns the survivors.
    A defunct target goes away once its parent dies, so list parents among the targets too."""

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
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while live() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not live():
            break
    return live()


@dataclass
class Group:
    title: str
    processes: list[procs.ProcStat] = field(default_factory=list)
    shm: list[str] = field(default_factory=list)
    state_path: Path | None = None


@dataclass
class Findings:
    groups: list[Group] = field(default_factory=list)
    stale: list[tuple[str, int, float]] = field(default_factory=list)
    active: list[str] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)
    gpu: dict[int, int] = field(default_factory=dict)  # pid -> GPU bytes

    def empty(self) -> bool:
        return not self.groups and not self.stale


def _closure(roots: set[int], stats: dict[int, procs.ProcStat]) -> set[int]:
    out, changed = set(roots), True
    while changed:
        changed = False
        for pid, st in stats.items():
            if pid not in out and st.ppid in out:
                out.add(pid)
                changed = True
    return out


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


def collect(min_age: float = 60.0) -> Findings:
    me = os.getpid()
    stats = {p: st for p in procs.pids() if p != me and (st := procs.read_stat(p)) is not None}
    marked = marked_processes()
    f = Findings(gpu=_gpu_holders())
    claimed: set[int] = set()
    for path, data in state.load_all():
        lid = data["id"]
        mine = {p for p, (lid2, _o, _s) in marked.items() if lid2 == lid}
        if procs.owner_alive(data.get("kvplan")):
            f.active.append(f"launch {lid} is running (kvplan {str(data.get('kvplan')).split(':')[0]}): left alone")
            claimed |= mine
            continue
        sid, start = int(data.get("sid") or 0), int(data.get("root_start") or 0)
        mine |= {p for p, st in stats.items() if sid and st.sid == sid and st.start >= start}
        mine = _closure(mine, stats) - claimed
        claimed |= mine
        d = data.get("shm_dir") or shm.shm_dir()
        segs = [os.path.join(d, n) for n in data.get("shm", []) if os.path.exists(os.path.join(d, n))]
        f.groups.append(Group(f"launch {lid} (state file {path.name}; its kvplan is gone)",
                              [stats[p] for p in sorted(mine) if p in stats], segs, path))
    by_id: dict[str, set[int]] = {}
    owners: dict[str, str | None] = {}
    for p, (lid, owner, _st) in marked.items():
        if p not in claimed:
            by_id.setdefault(lid, set()).add(p)
            owners[lid] = owner
    for lid, pids in sorted(by_id.items()):
        if procs.owner_alive(owners[lid]):
            f.active.append(f"launch {lid} is running (kvplan {str(owners[lid]).split(':')[0]}): left alone")
            claimed |= pids
            continue
        mine = _closure(pids, stats) - claimed
        claimed |= mine
        f.groups.append(Group(f"launch {lid} (processes marked {procs.MARKER}; its kvplan is gone)",
                              [stats[p] for p in sorted(mine) if p in stats]))
    for p, st in sorted(stats.items()):
        if p in claimed or st.ppid != 1 or not _engine_rank(procs.cmdline(p)):
            continue
        mine = _closure({p}, stats) - claimed
        claimed |= mine
        held = sum(f.gpu.get(q, 0) for q in mine)
        f.groups.append(Group(f"orphaned engine rank {p} ({procs.cmdline(p, 60)}; its parent is gone"
                              + (f"; holds {held / MiB:,.0f} MiB of GPU memory" if held else "") + ")",
                              [stats[q] for q in sorted(mine) if q in stats]))
    for p, b in sorted(f.gpu.items()):
        if p not in claimed:
            f.untouched.append(f"pid {p} holds {b / MiB:,.0f} MiB of GPU memory but is not tied to an engine launch "
                               f"({procs.cmdline(p, 80)}): not touched")
    listed = {s for g in f.groups for s in g.shm}
    f.stale = [x for x in shm.stale_segments(min_age_s=min_age) if x[0] not in listed]
    return f


def _print(f: Findings) -> None:
    for line in f.active + f.untouched:
        print(line)
    for g in f.groups:
        print(g.title)
        for st in g.processes:
            z = " (defunct)" if st.zombie else ""
            gpu = f", GPU {f.gpu[st.pid] / MiB:,.0f} MiB" if st.pid in f.gpu else ""
            print(f"  process {st.pid}{z}{gpu}: {procs.cmdline(st.pid, 100) or st.comm}")
        for s in g.shm:
            print(f"  /dev/shm segment {s}")
    for path, size, age in f.stale:
        print(f"stale segment {path}: {size / MiB:,.1f} MiB, unused, {age / 60:,.0f} min old")


def run(yes: bool = False, dry_run: bool = False, min_age: float = 60.0) -> int:
    """0 when nothing is left (or nothing was found), 1 when declined or something could not be removed."""
    f = collect(min_age)
    _print(f)
    if f.empty():
        print("nothing to clean up")
        return 0
    if dry_run:
        return 0
    if not yes:
        if not sys.stdin.isatty():
            print("not removed: no terminal to confirm on; pass --yes")
            return 1
        if input("remove all of the above? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return 1
    failed: list[str] = []
    targets = [st for g in f.groups for st in g.processes]
    survivors = stop_processes(targets)
    failed += [f"process {st.pid} survived SIGKILL" for st in survivors]
    for seg in [s for g in f.groups for s in g.shm] + [x[0] for x in f.stale]:
        try:
            os.unlink(seg)
        except FileNotFoundError:
            pass
        except OSError as e:
            failed.append(f"{seg}: {e.strerror}")
    for g in f.groups:
        if g.state_path is not None and not any(st in survivors for st in g.processes):
            g.state_path.unlink(missing_ok=True)
    n_shm = sum(len(g.shm) for g in f.groups) + len(f.stale)
    print(f"stopped {len(targets) - len(survivors)} process(es), removed {n_shm} segment(s)"
          + ("" if not failed else "; FAILED: " + "; ".join(failed)))
    return 1 if failed else 0
