"""The launched process tree: start it, find every descendant, stop it, and prove nothing is left.

Membership is decided three ways, so a process that left the session (``setsid``) or was orphaned by a double
fork is still found, and a process that merely reuses a pid is never taken:

* the session: the command starts as its own session leader, so its session id is its pid; this counts only while
  the root has not been reaped (until then no other process can get that pid, so no other session that id);
* a marker: the launch's secret ``KVPLAN_LAUNCH_TOKEN`` (with the id, ``KVPLAN_LAUNCH``), inherited through fork and
  exec, read from ``/proc/PID/environ`` (see ``launch.ownership``);
* ancestry: a child of a member is a member, and kvplan makes itself a *child subreaper*
  (``prctl(PR_SET_CHILD_SUBREAPER)``), so an orphaned grandchild is re-parented to kvplan instead of init,
  even if it also cleared its environment.

Linux only (``/proc``). Pids are checked together with their start time, so a reused pid is never signalled; the
process group is signalled (``killpg``) only while the root is unreaped, for the same reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kvplan.launch.ownership import MARKER, TOKEN  # the launch id and its secret

PAGE = os.sysconf("SC_PAGE_SIZE")
FULL_SCAN_S = 1.0  # every second, re-read every pid (pid reuse); in between only new pids and members
# after SIGKILL, how long a process may take to vanish: one tearing down GiBs of memory on a loaded host, or in
# uninterruptible sleep (D) for a moment, can take seconds (a CI run: a vLLM-CPU worker mid-allocation outlived 5 s);
# the wait ends as soon as nothing is left, so only a process that truly hangs costs the whole of it
KILL_WAIT_S = 30.0


@dataclass(slots=True)
class ProcStat:
    pid: int
    comm: str
    state: str  # R S D Z T ...
    ppid: int
    pgid: int
    sid: int
    start: int  # clock ticks after boot: (pid, start) names a process for good

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def read_stat(pid: int) -> ProcStat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    lp, rp = raw.find("("), raw.rfind(")")
    rest = raw[rp + 2:].split()
    try:
        return ProcStat(pid, raw[lp + 1:rp], rest[0], int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]))
    except (IndexError, ValueError):
        return None


def pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def environ_value(pid: int, name: str = MARKER) -> str | None:
    """The value of *name* in the process's initial environment; None when absent or unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = b"\0" + f.read()
    except OSError:
        return None
    key = b"\0" + name.encode() + b"="
    i = env.find(key)
    if i < 0:
        return None
    j = env.find(b"\0", i + len(key))
    return env[i + len(key):j if j >= 0 else None].decode(errors="replace")


def cmdline(pid: int, limit: int = 160) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:limit]


def private_rss(pid: int) -> int:
    """Resident anonymous bytes (statm: resident - shared = RssAnon): what the process itself allocated."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            parts = f.read().split()
        return max(0, int(parts[1]) - int(parts[2])) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def set_subreaper(on: bool) -> bool:
    """Make this process the reaper of its orphaned descendants (Linux >= 3.4)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1 if on else 0, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def own_start() -> int:
    me = read_stat(os.getpid())
    return me.start if me else 0


def new_launch_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]


def open_log(path: str, write: bool) -> int:
    """A file descriptor on the server log: a regular file only (a FIFO or a device would hang or lie), created
    0600 when new, never blocking on open."""
    import stat

    from kvplan.launch.state import open_private

    flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT) if write else os.O_RDONLY
    if write:
        from kvplan import validate
        from kvplan.errors import KvplanError

        try:
            validate.output_file("the log", path)
        except KvplanError as e:
            raise OSError(22, str(e)) from None
        fd = open_private(path, flags | os.O_NONBLOCK, follow=True)
    else:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(22, "not a regular file")
    os.set_blocking(fd, True)
    return fd


def start(argv: list[str], env: dict[str, str], log_path: str, launch_id: str, token: str) -> subprocess.Popen:
    """Start *argv* as a new session (its own process group) with stdout and stderr appended to *log_path*."""
    full = dict(os.environ)
    full.update(env)
    full[MARKER] = launch_id
    full[TOKEN] = token
    fd = open_log(log_path, write=True)
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT, env=full,
                                start_new_session=True, close_fds=True)
    finally:
        os.close(fd)


@dataclass
class Member:
    stat: ProcStat
    cmd: str
    first_seen: float
    zombie_since: float | None = None
    rss: int = 0
    peak_rss: int = 0
    last_alive: float = field(default=0.0)


class ProcessTree:
    """Every process of one launch (see the module docstring), refreshed by :meth:`scan`."""

    def __init__(self, launch_id: str, root: subprocess.Popen, token: str):
        self.launch_id, self.root, self.me, self.token = launch_id, root, os.getpid(), token
        self.sid = root.pid
        self.members: dict[int, Member] = {}
        self._others: dict[int, int] = {}  # non-members: pid -> start
        self._last_full = 0.0
        self.gone: list[Member] = []  # members that disappeared since the last pop_gone()
        self.seen: dict[int, int] = {}  # every member ever: pid -> start

    def _root_held(self) -> bool:
        """True while the root is unreaped: its pid (our session and group id) cannot belong to anyone else."""
        return self.root.returncode is None

    def _is_member(self, st: ProcStat) -> bool:
        if st.pid == self.me:
            return False
        if st.ppid == self.me or st.ppid in self.members:
            return True
        if self._root_held() and (st.sid == self.sid or st.pid == self.root.pid):
            return True
        from kvplan.launch.ownership import carries_token

        return carries_token(st.pid, self.token)

    def scan(self, now: float | None = None, full: bool = False) -> dict[int, Member]:
        now = time.monotonic() if now is None else now
        if full or now - self._last_full >= FULL_SCAN_S:
            self._others.clear()
            self._last_full = now
        seen: set[int] = set()
        fresh: list[ProcStat] = []
        for pid in pids():
            if pid in self._others:
                seen.add(pid)
                continue
            st = read_stat(pid)
            if st is None:
                continue
            seen.add(pid)
            m = self.members.get(pid)
            if m is not None and m.stat.start == st.start:
                m.stat = st
            else:
                if m is not None:  # pid reused
                    self.gone.append(self.members.pop(pid))
                fresh.append(st)
        changed = True
        while changed and fresh:  # a child can be listed before its parent: iterate to a fixpoint
            changed = False
            for st in list(fresh):
                if self._is_member(st):
                    self.members[st.pid] = Member(st, cmdline(st.pid), now)
                    self.seen[st.pid] = st.start
                    fresh.remove(st)
                    changed = True
        for st in fresh:
            self._others[st.pid] = st.start
        for pid in [p for p in self.members if p not in seen]:
            self.gone.append(self.members.pop(pid))
        for m in self.members.values():
            if m.stat.zombie:
                m.zombie_since = m.zombie_since or now
            else:
                m.last_alive = now
        return self.members

    def pop_gone(self) -> list[Member]:
        gone, self.gone = self.gone, []
        return gone

    def measure(self) -> int:
        """Sum of private RSS over the live members (bytes); updates each member's peak."""
        total = 0
        for m in self.members.values():
            if not m.stat.zombie:
                m.rss = private_rss(m.stat.pid)
                m.peak_rss = max(m.peak_rss, m.rss)
                total += m.rss
        return total

    def alive(self) -> list[ProcStat]:
        return [m.stat for m in self.members.values() if not m.stat.zombie]

    def reap(self) -> None:
        """Collect exited children of kvplan: the root (through Popen) and re-parented orphans."""
        self.root.poll()
        for m in list(self.members.values()):
            if m.stat.ppid == self.me and m.stat.pid != self.root.pid and m.stat.zombie:
                try:
                    os.waitpid(m.stat.pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def signal_all(self, sig: int, only: Iterable[ProcStat] | None = None) -> None:
        for st in list(only if only is not None else self.alive()):
            cur = read_stat(st.pid)
            if cur and cur.start == st.start and not cur.zombie:
                try:
                    os.kill(st.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        if self._root_held():  # else the group id may name another process group by now
            try:
                os.killpg(self.sid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def terminate(self, grace: float, escalate: Callable[[], bool] | None = None, kill_wait: float = KILL_WAIT_S
                  ) -> list[ProcStat]:
        """SIGTERM every member, wait up to *grace* (or until *escalate*() says the host cannot wait), SIGKILL
        what is left, keep finding late descendants; returns the processes that survived (should be [])."""
        self.scan()
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not (escalate and escalate()):
            self.reap()
            self.scan()
            if not self.alive():
                break
            time.sleep(0.02)
        deadline = time.monotonic() + kill_wait
        while True:
            self.reap()
            self.scan()
            alive = self.alive()
            if alive:
                self.signal_all(signal.SIGKILL, alive)
            elif not [m for m in self.members.values() if m.stat.ppid == self.me]:
                break  # zombies whose parent is init are init's to reap
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.reap()
        self.scan(full=True)  # every pid re-read: the final word
        return self.alive()

    def exit_code(self) -> int | None:
        rc = self.root.poll()
        if rc is None:
            return None
        return 128 - rc if rc < 0 else rc
