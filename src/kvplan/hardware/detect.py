"""What this machine has: GPUs through NVML (when nvidia-ml-py and a driver exist), host RAM through psutil,
the cgroup memory limit and /dev/shm. Every import here is lazy: the CLI must start fast."""

from __future__ import annotations

import os
from pathlib import Path


def detect_gpus() -> list[tuple[str, int]]:
    """[(nvidia-smi name, total MiB)] for local NVIDIA GPUs, or [] when there is no NVML. Asked once per process
    (every plan with --gpu asks whether it is this machine's; the GPUs do not change while kvplan runs)."""
    global _GPUS
    if _GPUS is None:
        _GPUS = tuple(_nvml_gpus())
    return list(_GPUS)


_GPUS: tuple[tuple[str, int], ...] | None = None


def _nvml_gpus() -> list[tuple[str, int]]:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no GPU
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else name
            out.append((name, int(pynvml.nvmlDeviceGetMemoryInfo(h).total) >> 20))
        return out
    finally:
        pynvml.nvmlShutdown()


def cgroup_limit_bytes() -> int | None:
    """memory.max (cgroup v2) or memory.limit_in_bytes (v1) of this process, None when unlimited."""
    for p in (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            raw = p.read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < (1 << 60):
            return int(raw)
    return None


def host_available_bytes() -> int:
    """MemAvailable, capped by the cgroup limit (what SGLang 0.5.23's available_host_memory_bytes does)."""
    import psutil

    avail = int(psutil.virtual_memory().available)
    lim = cgroup_limit_bytes()
    return min(avail, lim) if lim else avail


MEMINFO = "/proc/meminfo"  # read at each call (tests point it at a fake file)


def meminfo_bytes(path: str | None = None) -> dict[str, int]:
    """The ``kB`` fields of /proc/meminfo in bytes ({} when it cannot be read: not Linux)."""
    out: dict[str, int] = {}
    try:
        with open(path or MEMINFO) as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                    out[key.strip()] = int(parts[0]) * 1024
    except OSError:
        return {}
    return out


def held_by_others(path: str | None = None) -> tuple[int, int] | None:
    """(MemTotal − MemAvailable, MemTotal) of this machine, bytes: what its other processes and the kernel already
    hold before the launch (the page cache the kernel can drop is in MemAvailable, so not in it); None when
    /proc/meminfo has no MemAvailable (kernels before 3.14, not Linux)."""
    m = meminfo_bytes(path)
    if "MemTotal" not in m or "MemAvailable" not in m:
        return None
    return max(0, m["MemTotal"] - m["MemAvailable"]), m["MemTotal"]


def shm_bytes(path: str = "/dev/shm") -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def cpu_has_amx(path: str = "/proc/cpuinfo") -> bool:
    """Whether this machine's CPU has AMX tiles (the ``amx_tile`` flag; what ``torch.cpu._is_amx_tile_supported``
    reports on Linux x86). Reads at most 64 KiB: the flags repeat per core."""
    try:
        with open(path, "rb") as f:
            head = f.read(64 * 1024)
    except OSError:
        return False
    for line in head.split(b"\n"):
        if line.startswith(b"flags"):
            return b"amx_tile" in line.split(b":", 1)[-1].split()
    return False
