"""The watchdog: what is sampled every ``INTERVAL_S`` and when a launch is aborted.

Each sample reads host MemAvailable (``/proc/meminfo``) and the cgroup's headroom (limit - usage + inactive file
cache, the tightest of the process's cgroup and its ancestors), ``/dev/shm`` usage, the launch's memory (private RSS
of every process of the tree plus the shared-memory segments tied to it), GPU memory through NVML when there is a
GPU, how long the log has been silent, and dead or defunct processes.

Abort reasons (stable names, also in ``--events``):

* ``host-memory``: host available memory is below ``--host-reserve-gib``, or would fall below it before the next
  sample at the current slope while the launch is growing; or the launch's memory exceeds ``--host-budget-gib`` now
  or would before the next sample. Predicting one sample ahead is what keeps the stop within 2 s of the crossing.
* ``gpu-memory``: a GPU used by the launch has less than ``--gpu-reserve-mib`` free.
* ``rank-died``: a process of the launch (not its root) died and nobody reaped it for ``DEFUNCT_S`` (the hang of the
  incident: ranks wait forever on a defunct peer), or a big long-lived process vanished while the root lives on.
* ``stall``: before ready, nothing was logged for ``--stall-timeout`` while the launch's memory kept climbing.
* ``ready-timeout``: not ready after ``--ready-timeout``.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field

from kvplan.launch.gpu import GpuProbe, GpuSample  # noqa: F401 - GpuProbe is part of the watchdog's probes
from kvplan.units import GiB, MiB

REASONS = ("host-memory", "gpu-memory", "stall", "rank-died", "ready-timeout")
INTERVAL_S = 0.25
DEFUNCT_S = 0.5  # a dead process nobody reaps for this long is a dead rank (live parents reap in milliseconds)
MIN_LIFE_S = 0.3  # ... if it lived at least this long (not a helper that was just spawned)
VANISHED_MIN_RSS = 128 * MiB  # a process this big, alive >= VANISHED_MIN_LIFE_S, that disappears: a rank died
VANISHED_MIN_LIFE_S = 2.0
STALL_CLIMB = 4 * MiB  # memory growth during the silence that counts as "still climbing"
STALL_RECENT = 1 * MiB  # ... and growth over the recent window (it has not stopped)
DEFAULT_STALL_S = 300.0
DEFAULT_READY_S = 1800.0
DEFAULT_GPU_RESERVE_MIB = 256


def default_host_reserve(total_bytes: int) -> int:
    """5 % of RAM, at least 4 GiB, at most 32 GiB.

    Below a few GiB of MemAvailable the kernel starts reclaiming hard and the OOM killer picks victims (often sshd
    or the engine's peers, leaving defunct ranks); 4 GiB keeps a small box (and its page cache for the engine's
    mmap'ed weights) responsive. On big hosts 5 % tracks the per-node overheads that grow with RAM (page tables,
    slab, the NCCL/driver pinned buffers of 8 GPUs), like SGLang's own 10 GiB reserve on a 449 GiB node; the cap
    keeps a 2 TB host from holding back 100 GiB.
    """
    return int(min(max(0.05 * total_bytes, 4 * GiB), 32 * GiB))


def meminfo() -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes."""
    total = avail = 0
    with open("/proc/meminfo", "rb") as f:
        for line in f:
            if line.startswith(b"MemTotal:"):
                total = int(line.split()[1]) * 1024
            elif line.startswith(b"MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                break
    return total, avail


class Cgroup:
    """Memory headroom of this process's cgroup (v2 or v1) and its ancestors; empty when nothing is limited."""

    def __init__(self) -> None:
        self.dirs: list[tuple[str, int, str, str, bytes]] = []  # (dir, limit, usage file, stat file, key)
        try:
            lines = open("/proc/self/cgroup").read().splitlines()
        except OSError:
            lines = []
        for line in lines:
            hier, ctrl, path = (line.split(":", 2) + ["", ""])[:3]
            if hier == "0" and ctrl == "":
                self._add("/sys/fs/cgroup", path, "memory.max", "memory.current", b"inactive_file ")
            elif "memory" in ctrl.split(","):
                self._add("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes",
                          b"total_inactive_file ")

    def _add(self, base: str, path: str, lim: str, use: str, key: bytes) -> None:
        parts = [p for p in path.split("/") if p]
        for i in range(len(parts), -1, -1):
            d = os.path.join(base, *parts[:i])
            try:
                raw = open(os.path.join(d, lim)).read().strip()
            except OSError:
                continue
            if raw.isdigit() and int(raw) < (1 << 60) and all(x[0] != d for x in self.dirs):
                self.dirs.append((d, int(raw), os.path.join(d, use), os.path.join(d, "memory.stat"), key))

    def available(self) -> int | None:
        best = None
        for _d, limit, use, stat, key in self.dirs:
            try:
                usage = int(open(use).read())
                inactive = 0
                with open(stat, "rb") as f:
                    for line in f:
                        if line.startswith(key):
                            inactive = int(line.split()[1])
                            break
            except (OSError, ValueError):
                continue
            avail = limit - max(0, usage - inactive)
            best = avail if best is None else min(best, avail)
        return best


@dataclass
class Sample:
    t: float  # seconds since the launch started
    host_total: int
    host_available: int  # min(MemAvailable, cgroup headroom)
    cgroup_available: int | None
    shm_used: int | None
    tree_bytes: int  # private RSS of the tree + its /dev/shm segments
    tree_shm: int
    procs: int
    silent_s: float  # since the log last grew
    gpus: list[GpuSample] | None = None


@dataclass
class Limits:
    host_reserve: int
    host_budget: int | None = None
    stall_timeout: float | None = DEFAULT_STALL_S
    ready_timeout: float | None = None
    gpu_reserve: int = DEFAULT_GPU_RESERVE_MIB * MiB
    interval: float = INTERVAL_S


@dataclass
class Abort:
    reason: str  # one of REASONS
    signal: str  # what crossed: host-available, host-budget, gpu-free, defunct, vanished, log-silence, ready
    message: str  # the numbers, with units and scope
    numbers: dict = field(default_factory=dict)


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


class Watchdog:
    """Decides, sample by sample, whether to abort (see the module docstring)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.prev: Sample | None = None
        self.silence_min: int | None = None  # lowest launch memory since the log last grew
        self._last_write: float | None = None
        self.gpu_base: dict[int, int] | None = None  # GPU used bytes at the first sample
        self.recent: deque[tuple[float, int]] = deque()  # (t, launch memory) over the recent window

    def _slopes(self, s: Sample) -> tuple[float, float]:
        p = self.prev
        if p is None or s.t - p.t <= 1e-3:
            return 0.0, 0.0
        dt = s.t - p.t
        return (s.host_available - p.host_available) / dt, (s.tree_bytes - p.tree_bytes) / dt

    def evaluate(self, s: Sample, ready: bool, gpu_pids: set[int] | None = None) -> Abort | None:
        try:
            return self._evaluate(s, ready, gpu_pids or set())
        finally:
            self.prev = s

    def _evaluate(self, s: Sample, ready: bool, gpu_pids: set[int]) -> Abort | None:
        lim, h = self.limits, self.limits.interval
        d_avail, d_tree = self._slopes(s)
        nums = {"host_available_bytes": s.host_available, "host_reserve_bytes": lim.host_reserve,
                "tree_bytes": s.tree_bytes, "tree_slope_bytes_per_s": int(d_tree),
                "host_slope_bytes_per_s": int(d_avail), "processes": s.procs}
        where = "this node" + (" (cgroup limit)" if s.cgroup_available is not None
                               and s.cgroup_available <= s.host_available else "")
        if s.host_available < lim.host_reserve:
            return Abort("host-memory", "host-available", f"host available memory {_gib(s.host_available)} "
                         f"({where}) fell below the reserve {_gib(lim.host_reserve)} (--host-reserve-gib); the "
                         f"launch holds {_gib(s.tree_bytes)} ({s.procs} processes)", nums)
        ahead = s.host_available + d_avail * h
        if d_avail < 0 and d_tree > 0 and ahead < lim.host_reserve:
            return Abort("host-memory", "host-available", f"host available memory {_gib(s.host_available)} "
                         f"({where}) is falling {_gib(-d_avail)}/s and would cross the reserve "
                         f"{_gib(lim.host_reserve)} within {h:.2f} s; the launch holds {_gib(s.tree_bytes)} "
                         f"({s.procs} processes) and grows {_gib(d_tree)}/s", nums)
        if lim.host_budget is not None:
            nums["host_budget_bytes"] = lim.host_budget
            ahead_tree = s.tree_bytes + max(0.0, d_tree) * h
            if ahead_tree > lim.host_budget:
                when = "exceeds" if s.tree_bytes > lim.host_budget else f"would exceed within {h:.2f} s"
                return Abort("host-memory", "host-budget", f"the launch's memory {_gib(s.tree_bytes)} (private RSS "
                             f"of {s.procs} processes + {_gib(s.tree_shm)} /dev/shm, growing {_gib(d_tree)}/s) "
                             f"{when} the budget {_gib(lim.host_budget)} (--host-budget-gib)", nums)
        gpus = s.gpus or []
        if self.gpu_base is None:
            self.gpu_base = {g.index: g.used for g in gpus}
        ours = [g for g in gpus if set(g.pids) & gpu_pids]
        if not ours:  # in a container NVML shows host pids: fall back to the GPUs the launch filled since it started
            ours = [g for g in gpus if g.used - self.gpu_base.get(g.index, g.used) >= GiB]
        for g in ours:
            if g.free < lim.gpu_reserve:
                nums.update(gpu=g.index, gpu_free_bytes=g.free, gpu_total_bytes=g.total)
                return Abort("gpu-memory", "gpu-free", f"GPU {g.index}: {g.free / MiB:,.0f} MiB free of "
                             f"{g.total / MiB:,.0f} MiB (per GPU), below the reserve {lim.gpu_reserve / MiB:,.0f} "
                             "MiB (--gpu-reserve-mib)", nums)
        return self._timeouts(s, ready, nums)

    def _timeouts(self, s: Sample, ready: bool, nums: dict) -> Abort | None:
        lim = self.limits
        if ready:
            return None
        last_write = s.t - s.silent_s
        if self._last_write is None or last_write > self._last_write + 1e-3:  # the log grew since the last sample
            self._last_write, self.silence_min = last_write, s.tree_bytes
            self.recent.clear()
        floor = s.tree_bytes if self.silence_min is None else min(self.silence_min, s.tree_bytes)
        self.silence_min = floor
        if lim.stall_timeout is not None:
            window = min(s.silent_s, max(2.0, lim.stall_timeout / 2))
            self.recent.append((s.t, s.tree_bytes))
            while len(self.recent) > 1 and self.recent[1][0] <= s.t - window:
                self.recent.popleft()
            grew, recent = s.tree_bytes - floor, s.tree_bytes - self.recent[0][1]
            if s.silent_s >= lim.stall_timeout and grew >= STALL_CLIMB and recent >= STALL_RECENT:
                nums.update(silent_s=round(s.silent_s, 2), grew_bytes=grew)
                return Abort("stall", "log-silence", f"nothing logged for {s.silent_s:.1f} s (--stall-timeout "
                             f"{lim.stall_timeout:g} s) while the launch's memory climbed {grew / MiB:,.0f} MiB to "
                             f"{_gib(s.tree_bytes)} ({s.procs} processes)", nums)
        if lim.ready_timeout is not None and s.t >= lim.ready_timeout:
            return Abort("ready-timeout", "ready", f"not ready after {s.t:.1f} s (--ready-timeout "
                         f"{lim.ready_timeout:g} s)", nums)
        return None


def rank_death(tree, root_alive: bool, now: float) -> Abort | None:
    """A dead process of the launch that takes the others down with it (see the module docstring)."""
    if not root_alive:
        return None
    boot_now = time.clock_gettime(time.CLOCK_BOOTTIME)
    tck = os.sysconf("SC_CLK_TCK")
    for m in tree.members.values():
        if m.stat.pid == tree.root.pid or not m.zombie_since or now - m.zombie_since < DEFUNCT_S:
            continue
        life = boot_now - (now - m.zombie_since) - m.stat.start / tck
        if life >= MIN_LIFE_S:
            return Abort("rank-died", "defunct", f"process {m.stat.pid} ({m.cmd or m.stat.comm}) died and has been "
                         f"defunct for {now - m.zombie_since:.1f} s: its parent {m.stat.ppid} does not reap it, so "
                         "its peers wait on it forever", {"pid": m.stat.pid, "ppid": m.stat.ppid})
    for m in tree.pop_gone():
        if m.stat.pid != tree.root.pid and m.last_alive - m.first_seen >= VANISHED_MIN_LIFE_S and \
                m.peak_rss >= VANISHED_MIN_RSS:
            return Abort("rank-died", "vanished", f"process {m.stat.pid} ({m.cmd or m.stat.comm}), "
                         f"{_gib(m.peak_rss)} private RSS at its peak, exited while the server kept running",
                         {"pid": m.stat.pid, "peak_rss_bytes": m.peak_rss})
    return None
