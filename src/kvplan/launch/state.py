"""The launch state file: what ``kvplan cleanup`` needs when a launch's kvplan died before cleaning up.

One JSON file per launch in ``$KVPLAN_STATE_DIR`` (default ``~/.cache/kvplan/launches``), written atomically:

``{"schema": 2, "id", "uid", "token_sha256", "kvplan": {"pid", "start", "ns"}, "processes": [[pid, start], ...],
"shm_dir", "shm": [{"name", "ino", "dev"}], "argv" (secrets redacted), "log", "status", "started_at"}``

``kvplan`` is the supervising kvplan (pid in its PID namespace ``ns``, start ticks); ``processes`` every process of
the launch seen so far (same namespace); ``shm`` the /dev/shm segments tied to it (bare names with their inode).
``status`` is ``running`` while kvplan supervises; the file is removed when the launch ends with nothing left, and
marked ``left`` (or ``error`` after an internal error) otherwise, on every exit path.

Trust: the directory must be a real directory (not a symlink) owned by the current user and not writable by group
or others (kvplan creates it 0700); each file a regular file (not a symlink, not a FIFO) owned by the user, not
group/other-writable (kvplan writes 0600), at most 1 MiB, and well-formed. Anything else is ignored with a
warning, never fatal. A file is removed only while it is the one that was read (same inode) with one link. Logs
default to the same directory (``<id>.log``, 0600) and are kept.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError

SCHEMA = 2
MAX_FILE = 1 << 20
MAX_FILES = 10_000
MAX_PROCESSES = 65_536
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def state_dir() -> Path:
    env = os.environ.get("KVPLAN_STATE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kvplan" / "launches"


def dir_problem(d: Path, st: os.stat_result | None = None) -> str | None:
    """Why *d* cannot be trusted as a state directory, or None."""
    try:
        st = st or os.lstat(d)
    except OSError as e:
        return f"cannot read it ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
    if st.st_mode & 0o022:
        return f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def ensure_dir() -> Path:
    """The state directory, created 0700 (an existing one of this user is tightened to 0700)."""
    d = state_dir()
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(d)
        if not stat.S_ISLNK(st.st_mode) and stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() \
                and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(d, 0o700)
            st = os.lstat(d)
    except OSError as e:
        raise KvplanError(f"state directory {d}: {e.strerror}",
                          "set KVPLAN_STATE_DIR to a directory of yours") from None
    why = dir_problem(d, st)
    if why:
        raise KvplanError(f"state directory {d} cannot be used: {why}",
                          "set KVPLAN_STATE_DIR to a directory owned by you with mode 0700")
    return d


def open_private(path: str | Path, flags: int, follow: bool = False) -> int:
    """Open with mode 0600 when created; through a symlink at the last component only when *follow*."""
    return os.open(path, flags | (0 if follow else os.O_NOFOLLOW) | os.O_CLOEXEC, 0o600)


class LaunchState:
    """The state file of the running launch (written by the supervisor)."""

    def __init__(self, launch_id: str, data: dict[str, Any]):
        if not ID_RE.match(launch_id):
            raise ValueError(f"bad launch id {launch_id!r}")
        self.id = launch_id
        self.dir = ensure_dir()
        self.path = self.dir / f"{launch_id}.json"
        self.data = {"schema": SCHEMA, "id": launch_id, "uid": os.getuid(), **data}
        self.removed = False

    def write(self, **changes: Any) -> None:
        self.data.update(changes)
        tmp = self.dir / f".{self.id}.{os.getpid()}.tmp"
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)
        self.removed = False

    def remove(self) -> None:
        """Unlink the launch's own file: a regular file of one link (a hard link made by hand stays)."""
        try:
            st = os.lstat(self.path)
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                self.path.unlink()
        except FileNotFoundError:
            pass
        self.removed = True


@dataclass(frozen=True)
class Segment:
    name: str
    ino: int
    dev: int


@dataclass(frozen=True)
class Record:
    """One state file, parsed and checked (see the module docstring)."""

    path: Path
    file_ino: int
    id: str
    token_sha256: str
    kvplan_pid: int
    kvplan_start: int
    ns: int | None
    processes: tuple[tuple[int, int], ...]
    shm_dir: str
    shm: tuple[Segment, ...]
    status: str
    log: str | None
    file_links: int = 1  # st_nlink when read: kvplan writes one name (tmp + rename); more are hard links made by hand


def _int(v: Any, what: str, lo: int = 0, hi: int = 1 << 63) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{what} must be an integer in [{lo}, {hi}], got {str(v)[:40]!r}")
    return v


def bare_name(name: Any) -> str:
    """A file name directly inside the shm directory: no '/', no NUL, not '.' or '..'."""
    if not isinstance(name, str) or not name or len(name) > 255 or "/" in name or "\0" in name \
            or name in (".", ".."):
        raise ValueError(f"segment name {str(name)[:60]!r} is not a bare file name")
    return name


def parse(data: Any, path: Path, file_ino: int, file_links: int = 1) -> Record:
    """A Record from a state file's JSON, or ValueError saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("schema") != SCHEMA:
        raise ValueError("written by an older kvplan (no proof of ownership in it)")
    lid = data.get("id")
    if not isinstance(lid, str) or not ID_RE.match(lid) or path.name != f"{lid}.json":
        raise ValueError(f"its id {str(lid)[:40]!r} does not name the file")
    if _int(data.get("uid"), "uid") != os.getuid():
        raise ValueError(f"it names uid {data.get('uid')}, not yours")
    tok = data.get("token_sha256")
    if not isinstance(tok, str) or not HEX64.match(tok):
        raise ValueError("token_sha256 is not a SHA-256")
    kv = data.get("kvplan")
    if not isinstance(kv, dict):
        raise ValueError("kvplan must be an object")
    ns = kv.get("ns")
    ns = None if ns is None else _int(ns, "kvplan.ns")
    procs = data.get("processes", [])
    if not isinstance(procs, list) or len(procs) > MAX_PROCESSES:
        raise ValueError("processes must be a list of [pid, start] pairs")
    pairs = []
    for p in procs:
        if not isinstance(p, list) or len(p) != 2:
            raise ValueError("processes must be a list of [pid, start] pairs")
        pairs.append((_int(p[0], "pid", 1, 1 << 31), _int(p[1], "start")))
    shm_dir = data.get("shm_dir", "")
    if not isinstance(shm_dir, str):
        raise ValueError("shm_dir must be a string")
    segs = data.get("shm", [])
    if not isinstance(segs, list) or len(segs) > MAX_PROCESSES:
        raise ValueError("shm must be a list of {name, ino, dev}")
    shm = []
    for s in segs:
        if not isinstance(s, dict):
            raise ValueError("shm must be a list of {name, ino, dev}")
        shm.append(Segment(bare_name(s.get("name")), _int(s.get("ino"), "shm ino", 1), _int(s.get("dev"), "shm dev")))
    status, log = data.get("status"), data.get("log")
    if not isinstance(status, str) or (log is not None and not isinstance(log, str)):
        raise ValueError("status / log must be strings")
    return Record(path, file_ino, lid, tok, _int(kv.get("pid"), "kvplan.pid", 1, 1 << 31),
                  _int(kv.get("start"), "kvplan.start"), ns, tuple(pairs), shm_dir, tuple(shm), status, log,
                  file_links)


def _read(dfd: int, name: str) -> tuple[Any, int, int]:
    """(JSON value, inode, link count) of one file in the directory *dfd*, or ValueError."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as e:
        raise ValueError("it is a symlink" if e.errno == errno.ELOOP else f"cannot open it ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("it is not a regular file")
        if st.st_uid != os.getuid():
            raise ValueError(f"it is owned by uid {st.st_uid}, not by you")
        if st.st_mode & 0o022:
            raise ValueError(f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})")
        if st.st_size > MAX_FILE:
            raise ValueError(f"it is {st.st_size:,} bytes, more than a state file holds")
        raw = os.read(fd, MAX_FILE + 1)
    finally:
        os.close(fd)
    try:
        return json.loads(raw.decode("utf-8")), st.st_ino, st.st_nlink
    except (UnicodeDecodeError, ValueError):
        raise ValueError("it is not valid JSON") from None
    except RecursionError:
        raise ValueError("its JSON is nested too deeply") from None


def load_all() -> tuple[list[Record], list[str]]:
    """Every trustworthy state file, and a warning for each directory or file that was ignored."""
    d = state_dir()
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        return [], []
    except OSError as e:
        return [], [f"state directory {d} ignored: cannot read it ({e.strerror})"]
    why = dir_problem(d, st)
    if why:
        return [], [f"state directory {d} ignored: {why} (kvplan keeps it 0700 and yours)"]
    try:
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        return [], [f"state directory {d} ignored: {e.strerror}"]
    out: list[Record] = []
    warnings: list[str] = []
    try:
        if os.fstat(dfd).st_ino != st.st_ino:
            return [], [f"state directory {d} ignored: it changed while being read"]
        names = sorted(n for n in os.listdir(dfd) if n.endswith(".json"))
        if len(names) > MAX_FILES:
            warnings.append(f"state directory {d}: only the first {MAX_FILES:,} of {len(names):,} files read")
        for name in names[:MAX_FILES]:
            path = d / name
            try:
                data, ino, links = _read(dfd, name)
                out.append(parse(data, path, ino, links))
            except (ValueError, TypeError, RecursionError) as e:
                warnings.append(f"state file {path} ignored: {e}")
    finally:
        os.close(dfd)
    return out, warnings


def removal_problem(rec: Record, st: os.stat_result | None = None) -> str | None:
    """Why the state file of *rec* must not be unlinked (None: it may): it must still be the file that was read (same
    inode), a regular file of this user with one link (a second name is a hard link made by hand: not kvplan's)."""
    try:
        st = st or os.lstat(rec.path)
    except FileNotFoundError:
        return "it is gone"
    except OSError as e:
        return f"cannot read it ({e.strerror})"
    if not stat.S_ISREG(st.st_mode) or st.st_ino != rec.file_ino:
        return "it was replaced since it was read"
    if st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}"
    if st.st_nlink != 1:
        return f"it has {st.st_nlink} hard links (kvplan writes one): remove it by hand"
    return None


def remove_record(rec: Record) -> str | None:
    """Remove a state file that was read (:func:`removal_problem`); None when removed, else why not."""
    why = removal_problem(rec)
    if why:
        return why
    try:
        os.unlink(rec.path)
    except OSError as e:
        return e.strerror or str(e)
    return None
