"""Shared bits of the fault programs (plain Python, stdlib only): log lines in an engine's format, real memory,
and a pid file so the tests can check in /proc that every process is gone."""

from __future__ import annotations

import mmap
import os
import sys
import time


def record_pid() -> None:
    """Append "pid start_ticks" of this process to $FAULT_PIDS (one per line)."""
    path = os.environ.get("FAULT_PIDS")
    if path:
        with open("/proc/self/stat") as f:
            start = f.read().rsplit(")", 1)[1].split()[19]
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {start}\n")


def mono() -> str:
    """A CLOCK_MONOTONIC stamp (comparable across processes): tests measure latencies from it."""
    return f"t={time.monotonic():.3f}"


def log(msg: str, tp: int | None = 0) -> None:
    """An SGLang-style line: ``[YYYY-mm-dd HH:MM:SS TP0] msg``."""
    rank = f" TP{tp}" if tp is not None else ""
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}{rank}] {msg}", flush=True)


def touch(n_bytes: int) -> bytearray:
    """n bytes of resident anonymous memory (every page written)."""
    buf = bytearray(n_bytes)
    for i in range(0, n_bytes, 4096):
        buf[i] = 1
    return buf


def shm_segment(n_bytes: int, tag: str = "kvtest") -> tuple[str, mmap.mmap]:
    """A /dev/shm segment named like Python's shared_memory ones (psm_*), mapped and filled; never unlinked."""
    d = os.environ.get("FAULT_SHM_DIR", "/dev/shm")
    path = os.path.join(d, f"psm_{tag}_{os.getpid()}_{time.monotonic_ns() % 10**6}")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, n_bytes)
    m = mmap.mmap(fd, n_bytes)
    os.close(fd)
    for i in range(0, n_bytes, 4096):
        m[i] = 1
    return path, m


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def arg(name: str, default: float) -> float:
    """``--name VALUE`` from argv."""
    if name in sys.argv:
        return float(sys.argv[sys.argv.index(name) + 1])
    return default
