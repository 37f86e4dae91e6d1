"""Proof that a process belongs to a kvplan launch, across PID namespaces. Linux ``/proc`` only.

Every launch draws an unguessable secret (:func:`new_token`, 128 bits) and puts it in the environment of the
command it starts (``KVPLAN_LAUNCH_TOKEN``), so every descendant inherits it; the state file keeps only its
SHA-256. A process is the launch's only when

* it runs under the current uid (real and effective; as root, other users' processes are never touched), and
* its initial environment (``/proc/PID/environ``) holds the launch id and a token whose SHA-256 is the recorded one.

A pid means something only in its own PID namespace, so every pid kvplan records goes with the namespace inode
(``/proc/PID/ns/pid``) and the start time (clock ticks after boot, ``/proc/PID/stat`` field 22, the same in every
namespace). :class:`ProcView` maps a (namespace, pid) pair to the pid this process sees, through the ``NSpid``
line of ``/proc/PID/status``; a namespace none of whose processes are visible here (a parent or sibling
container) is *unknown*, and what was launched in it is left alone.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass

TOKEN = "KVPLAN_LAUNCH_TOKEN"
# KVPLAN_LAUNCH_ID in kvplan before the token: renamed so that an older kvplan's cleanup (which stopped marked
# processes whose supervisor it could not see, e.g. in another PID namespace) never selects these launches
MARKER = "KVPLAN_LAUNCH"
ENVIRON_MAX = 1 << 20  # bytes of /proc/PID/environ read at most


def new_token() -> str:
    return secrets.token_hex(16)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def pid_ns(pid: int | str = "self") -> int | None:
    """Inode of the PID namespace of *pid*; None when unreadable (gone, or another user's process)."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def status_fields(pid: int) -> dict[str, str]:
    """``Uid``, ``NSpid`` ... lines of /proc/PID/status."""
    out = {}
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for raw in f.read(16384).decode(errors="replace").splitlines():
                k, _, v = raw.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def uids(pid: int) -> tuple[int, int] | None:
    """(real, effective) uid of *pid*."""
    try:
        parts = status_fields(pid)["Uid"].split()
        return int(parts[0]), int(parts[1])
    except (KeyError, IndexError, ValueError):
        return None


def same_uid(pid: int, uid: int | None = None) -> bool:
    uid = os.getuid() if uid is None else uid
    u = uids(pid)
    return u is not None and u[0] == uid and u[1] == uid


def environ(pid: int) -> dict[bytes, bytes]:
    """The initial environment of *pid* (first MiB); {} when unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read(ENVIRON_MAX)
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        k, eq, v = item.partition(b"=")
        if eq and k not in out:
            out[k] = v
    return out


def carries(pid: int, launch_id: str, hashed_token: str) -> bool:
    """Does *pid* (same uid) carry this launch's id and secret in its environment?"""
    m = marker(pid)
    return m is not None and m[0] == launch_id and secrets.compare_digest(m[1], hashed_token)


def marker(pid: int) -> tuple[str, str] | None:
    """(launch id, SHA-256 of the token) that *pid* (same uid) carries, or None."""
    if not same_uid(pid):
        return None
    env = environ(pid)
    tok, lid = env.get(TOKEN.encode()), env.get(MARKER.encode())
    if tok is None or lid is None:
        return None
    return lid.decode(errors="replace"), token_hash(tok.decode(errors="replace"))


def carries_token(pid: int, token: str) -> bool:
    """The supervisor's own check (it knows the token itself)."""
    tok = environ(pid).get(TOKEN.encode())
    return tok is not None and secrets.compare_digest(tok.decode(errors="replace"), token)


@dataclass(frozen=True)
class Visible:
    pid: int  # as this process sees it
    ns: int | None  # PID namespace inode
    inner_pid: int | None  # the pid in its own namespace (last NSpid entry)


class ProcView:
    """Every process this one can see, with its namespace and its pid inside that namespace."""

    def __init__(self) -> None:
        self.me_ns = pid_ns()
        self.procs: dict[int, Visible] = {}
        self.by_ns: dict[int, dict[int, int]] = {}  # ns -> inner pid -> visible pid
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            pid = int(d)
            ns = pid_ns(pid)
            nspid = status_fields(pid).get("NSpid", "").split()
            inner = int(nspid[-1]) if nspid and nspid[-1].isdigit() else (pid if ns == self.me_ns else None)
            self.procs[pid] = Visible(pid, ns, inner)
            if ns is not None and inner is not None:
                self.by_ns.setdefault(ns, {})[inner] = pid

    def sees_ns(self, ns: int | None) -> bool:
        """Is any process of namespace *ns* visible here (this namespace or one nested in it)?"""
        return ns is not None and (ns == self.me_ns or ns in self.by_ns)

    def visible_pid(self, ns: int | None, inner_pid: int) -> int | None:
        """The pid seen here of the process that is *inner_pid* in namespace *ns*."""
        if ns is None:
            return None
        if ns == self.me_ns:
            return inner_pid if inner_pid in self.procs else None
        return self.by_ns.get(ns, {}).get(inner_pid)

    def inner(self, pid: int) -> tuple[int | None, int | None]:
        v = self.procs.get(pid)
        return (v.ns, v.inner_pid) if v else (None, None)
