"""Host memory of a live process group, read from /proc (stdlib only: the test process has no psutil promise).

Per process, ``/proc/<pid>/smaps_rollup`` (Linux 4.14+): the sums over every mapping of the process, in kB:

- ``Pss``: each resident page divided by the number of processes mapping it: private pages whole, a shared library's
  or a /dev/shm segment's pages split among their mappers. Summed over a process group it counts every page the
  group holds exactly once (pages shared with processes outside the group count for the group's share only);
- ``Pss_Anon`` / ``Pss_File`` / ``Pss_Shmem``: the same split by kind (anonymous, file-backed, shmem / tmpfs);
- ``Rss``: every resident page in full, in every process (shared pages counted once per mapper: the sum
  over-counts); ``Private_Clean + Private_Dirty``: the pages no other process maps.

The group's PSS is the measure of "what this launch holds in host memory": private memory, plus shared memory
(the executor's /dev/shm queues, the shared libraries) counted once.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

FIELDS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Pss_Shmem", "Private_Clean", "Private_Dirty")


def rollup(pid: int) -> dict[str, int]:
    """The FIELDS of /proc/<pid>/smaps_rollup in bytes (OSError when the process is gone)."""
    out = dict.fromkeys(FIELDS, 0)
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in out:
                out[key] = int(rest.split()[0]) * 1024  # "Pss:  123456 kB"
    return out


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


@dataclass(frozen=True)
class ProcMemory:
    pid: int
    name: str
    fields: dict[str, int]


@dataclass(frozen=True)
class GroupMemory:
    """One reading of every live process of a process group."""

    procs: tuple[ProcMemory, ...]

    def sum(self, field: str) -> int:
        return sum(p.fields[field] for p in self.procs)

    @property
    def pss_bytes(self) -> int:
        return self.sum("Pss")

    @property
    def rss_bytes(self) -> int:
        return self.sum("Rss")

    @property
    def private_bytes(self) -> int:
        return self.sum("Private_Clean") + self.sum("Private_Dirty")

    def describe(self) -> str:
        mib = 1 << 20
        per = ", ".join(f"{p.name}[{p.pid}] {p.fields['Pss'] / mib:,.0f}" for p in
                        sorted(self.procs, key=lambda p: -p.fields["Pss"]))
        return (f"PSS {self.pss_bytes / mib:,.0f} MiB (anon {self.sum('Pss_Anon') / mib:,.0f}, file "
                f"{self.sum('Pss_File') / mib:,.0f}, shmem {self.sum('Pss_Shmem') / mib:,.1f}); RSS "
                f"{self.rss_bytes / mib:,.0f} MiB, private {self.private_bytes / mib:,.0f} MiB; per process PSS MiB: "
                f"{per}")


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) members of process group ``pgid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # "pid (comm) state ppid pgrp ..."
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(entry))
    return out


def group_memory(pgid: int) -> GroupMemory:
    procs = []
    for pid in group_pids(pgid):
        try:
            procs.append(ProcMemory(pid, _name(pid), rollup(pid)))
        except (OSError, ValueError, IndexError):
            continue  # exited between the listing and the read
    return GroupMemory(tuple(procs))


def settled_memory(pgid: int, *, within: float = 0.01, readings: int = 3, poll_s: float = 0.5,
                   timeout_s: float = 120.0) -> GroupMemory:
    """The group's memory once it stopped moving: the last ``readings`` PSS sums (``poll_s`` apart) within
    ``within`` of each other and the same processes in each; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: list[GroupMemory] = []
    while True:
        last = [*last[-(readings - 1):], group_memory(pgid)]
        if len(last) == readings:
            sums = [g.pss_bytes for g in last]
            same = len({tuple(sorted(p.pid for p in g.procs)) for g in last}) == 1
            if same and sums[-1] > 0 and (max(sums) - min(sums)) <= within * max(sums):
                return last[-1]
        if time.monotonic() > deadline:
            raise AssertionError(f"process group {pgid}'s memory did not settle within {timeout_s:.0f} s: "
                                 + "; ".join(g.describe() for g in last))
        time.sleep(poll_s)
