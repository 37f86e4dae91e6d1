"""GPU memory through NVML (nvidia-ml-py), imported lazily: per GPU, total and used bytes and the processes that
hold memory on it. Without the module, a driver or a GPU the probe is off (``ok`` is False) and the watchdog does
not watch GPUs; ``kvplan cleanup`` then cannot say which processes hold GPU memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast


@dataclass
class GpuSample:
    index: int
    total: int
    used: int
    pids: dict[int, int] = field(default_factory=dict)  # pid -> bytes on this GPU

    @property
    def free(self) -> int:
        return self.total - self.used


class GpuProbe:
    """NVML, imported lazily; ``ok`` is False without nvidia-ml-py or a driver."""

    def __init__(self) -> None:
        self.ok, self.handles, self._nv = False, [], cast(Any, None)  # pynvml once it loads
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self.ok = bool(self.handles)
        except Exception:  # noqa: BLE001 - no module, no driver, no GPU: the probe is off
            self.ok = False

    def sample(self) -> list[GpuSample]:
        out = []
        nv = self._nv
        for i, h in enumerate(self.handles):
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except Exception:  # noqa: BLE001
                continue
            out.append(GpuSample(i, int(mem.total), int(mem.used),
                                 {int(p.pid): int(p.usedGpuMemory or 0) for p in procs}))
        return out

    def close(self) -> None:
        if self.ok:
            try:
                self._nv.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
