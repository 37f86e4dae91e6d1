"""GPU catalog: product name as nvidia-smi / amd-smi print it, aliases, memory.total in MiB, and peak figures.

Data lives in ``gpus.json`` with a source for every figure. SGLang's default fraction heuristic reads
this same nvidia-smi total (``get_nvgpu_memory_capacity``), so MiB here is exactly what engines see.
Peak figures (for the simulator, ``gpu_perf``): memory bandwidth in decimal GB/s and dense (no sparsity)
bf16 / fp8 tensor TFLOPS from the vendor datasheet (``perf_source``); None where the part has no such
support or the vendor publishes none.
GPU facts engines gate on: ``compute_capability`` ("major.minor" from https://developer.nvidia.com/cuda-gpus; None
for AMD) and ``architecture`` (NVIDIA architecture name; for AMD the gfx target from
https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html), one source URL per entry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kvplan.errors import KvplanError

GPU_FILE = Path(__file__).with_name("gpus.json")


@dataclass(frozen=True)
class GpuPerf:
    """Peak figures of one GPU (per device as nvidia-smi / amd-smi list it), from the vendor datasheet."""

    mem_bw_gbps: float | None  # HBM/GDDR bandwidth, decimal GB/s
    bf16_dense_tflops: float | None  # dense tensor bf16, no sparsity; None = unsupported / unpublished
    fp8_dense_tflops: float | None  # dense tensor fp8, no sparsity; None = unsupported / unpublished
    source: str | None  # datasheet URL (None: no public datasheet, see note)
    note: str = ""


@dataclass(frozen=True)
class GPU:
    name: str
    total_mib: int
    vendor: str = "nvidia"
    source: str | None = None
    platform: str = "cuda"  # "cuda" | "rocm"
    aliases: tuple[str, ...] = ()
    perf: GpuPerf | None = None
    torch_total_mib: int | None = None  # what torch.cuda.mem_get_info() reports as total (None: not catalogued)
    torch_total_range_mib: tuple[int, int] | None = None  # its spread over drivers seen in public logs
    torch_total_source: str | None = None
    compute_capability: str | None = None  # CUDA "major.minor" (None: not NVIDIA, or not catalogued)
    architecture: str | None = None  # "Hopper", "Ada Lovelace", ...; AMD: the gfx target ("gfx942")
    compute_capability_source: str | None = None

    @property
    def cc(self) -> float | None:
        """The compute capability as a number (9.0, 12.0); None for non-NVIDIA parts."""
        return float(self.compute_capability) if self.compute_capability else None

    @property
    def device_capability(self) -> tuple[int, int] | None:
        """What ``torch.cuda.get_device_capability()`` returns on this part: NVIDIA (major, minor) of the compute
        capability; AMD the gfx target's (major, minor) as HIP reports it (gfx942 -> (9, 4), gfx90a -> (9, 0))."""
        if self.compute_capability:
            major, minor = self.compute_capability.split(".")
            return int(major), int(minor)
        arch = self.architecture or ""
        m = re.fullmatch(r"gfx(\d{1,2})([0-9a-f])[0-9a-f]", arch)
        return (int(m.group(1)), int(m.group(2), 16)) if m else None

    @property
    def total_bytes(self) -> int:
        return self.total_mib * (1 << 20)

    @property
    def driver_reserve_range_mib(self) -> tuple[int, int, int] | None:
        """memory.total − torch's total, (typical, low, high) MiB: the part of the device CUDA never offers."""
        if not self.torch_total_mib or not self.total_mib:
            return None
        lo_t, hi_t = self.torch_total_range_mib or (self.torch_total_mib, self.torch_total_mib)
        return (self.total_mib - self.torch_total_mib, max(0, self.total_mib - hi_t), max(0, self.total_mib - lo_t))

    def to_dict(self) -> dict:
        p = self.perf
        return {"name": self.name, "aliases": list(self.aliases), "vendor": self.vendor, "platform": self.platform,
                "total_mib": self.total_mib or None, "source": self.source,
                "mem_bw_gbps": p.mem_bw_gbps if p else None, "bf16_dense_tflops": p.bf16_dense_tflops if p else None,
                "fp8_dense_tflops": p.fp8_dense_tflops if p else None, "perf_source": p.source if p else None,
                "compute_capability": self.compute_capability, "architecture": self.architecture,
                "compute_capability_source": self.compute_capability_source}


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


@lru_cache(maxsize=1)
def _entries() -> tuple[dict, ...]:
    return tuple(json.loads(GPU_FILE.read_text(encoding="utf-8"))["gpus"])


@lru_cache(maxsize=1)
def _index_all() -> dict[str, dict]:
    idx: dict[str, dict] = {}
    for g in _entries():
        for key in [g["name"], *g.get("aliases", [])]:
            idx.setdefault(_norm(key), g)
    return idx


@lru_cache(maxsize=1)
def _index() -> dict[str, dict]:
    """Entries with a known memory.total (what planning can use)."""
    return {k: g for k, g in _index_all().items() if g.get("total_mib")}


def _gpu(g: dict) -> GPU:
    perf = None
    if "mem_bw_gbps" in g:
        perf = GpuPerf(g.get("mem_bw_gbps"), g.get("bf16_dense_tflops"), g.get("fp8_dense_tflops"),
                       g.get("perf_source"), g.get("perf_note", ""))
    vendor = g.get("vendor", "nvidia")
    return GPU(name=g["name"], total_mib=int(g.get("total_mib") or 0), vendor=vendor, source=g.get("source"),
               platform=g.get("platform", "rocm" if vendor == "amd" else "cuda"),
               aliases=tuple(g.get("aliases", [])), perf=perf, torch_total_mib=g.get("torch_total_mib"),
               torch_total_range_mib=tuple(g["torch_total_range_mib"]) if g.get("torch_total_range_mib") else None,
               torch_total_source=g.get("torch_total_source"), compute_capability=g.get("compute_capability"),
               architecture=g.get("architecture"), compute_capability_source=g.get("compute_capability_source"))


def known_gpus() -> list[str]:
    return sorted({g["name"] for g in _index().values()})


def all_gpus() -> list[GPU]:
    """Every catalog entry (also those whose memory.total is unknown: total_mib 0), sorted by name."""
    return sorted((_gpu(g) for g in _entries()), key=lambda g: (g.vendor, g.name))


CPU_PLATFORM_NAMES = ("cpu",)  # ``--gpu cpu``: no GPU, the engine's CPU build (the engine decides what that means)


def names_cpu(name: str | None) -> bool:
    """True when ``--gpu`` names the CPU platform rather than a GPU (``--gpu cpu``): a platform alias, not a catalog
    entry; each engine package decides what its CPU build plans (vLLM: ``VLLMArgs.is_cpu``)."""
    return bool(name) and _names_cpu(str(name))


@lru_cache(maxsize=256)  # asked on every plan with the same few names
def _names_cpu(name: str) -> bool:
    return _norm(name) in {_norm(n) for n in CPU_PLATFORM_NAMES}


def lookup_gpu(name: str) -> GPU:
    """Find a GPU by its nvidia-smi name or an alias (case and punctuation ignored)."""
    gpu = _find(name)
    if gpu is None and names_cpu(name):
        raise KvplanError(f"--gpu {name} names the CPU platform, which this engine is not planned on",
                          "give a GPU from `kvplan gpus`; kvplan plans the CPU platform for vLLM-CPU")
    if gpu is None:
        hint = "use a name from `kvplan gpus` or give its memory with --gpu-mem-mib"
        if _norm(name) in _index_all():
            hint = "its memory.total is not catalogued (see the note in `kvplan gpus --json`); pass --gpu-mem-mib"
        raise KvplanError(f"unknown GPU {name!r}", hint)
    return gpu


def find_gpu(name: str | None) -> GPU | None:
    """The catalog entry for ``name`` (nvidia-smi name or alias), or None."""
    return _find(name) if name else None


@lru_cache(maxsize=512)
def _find(name: str) -> GPU | None:
    """The catalog's GPU for a name, built once per name (every plan looks its GPU up several times)."""
    g = _index().get(_norm(name))
    return _gpu(g) if g is not None else None


def gpu_perf(name_or_alias: str) -> GpuPerf:
    """Peak bandwidth and dense tensor TFLOPS of a catalog GPU (for the simulator); KvplanError if unknown."""
    g = _index_all().get(_norm(name_or_alias))
    if g is None:
        raise KvplanError(f"unknown GPU {name_or_alias!r}", "use a name or alias from `kvplan gpus`")
    perf = _gpu(g).perf
    return perf if perf is not None else GpuPerf(None, None, None, None, "no figures in the catalog")
