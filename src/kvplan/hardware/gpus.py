"""GPU catalog: product name as nvidia-smi / amd-smi print it, aliases, and memory.total in MiB.

Data lives in ``gpus.json`` with a source for every figure. SGLang's default fraction heuristic reads
this same nvidia-smi total (``get_nvgpu_memory_capacity``), so MiB here is exactly what engines see.
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
class GPU:
    name: str
    total_mib: int
    vendor: str = "nvidia"
    source: str | None = None

    @property
    def total_bytes(self) -> int:
        return self.total_mib * (1 << 20)


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


@lru_cache(maxsize=1)
def _index() -> dict[str, dict]:
    data = json.loads(GPU_FILE.read_text(encoding="utf-8"))
    idx: dict[str, dict] = {}
    for g in data["gpus"]:
        if not g.get("total_mib"):
            continue
        for key in [g["name"], *g.get("aliases", [])]:
            idx.setdefault(_norm(key), g)
    return idx


def lookup_gpu(name: str) -> GPU:
    """Find a GPU by its nvidia-smi name or an alias (case and punctuation ignored)."""
    g = _index().get(_norm(name))
    if g is None:
        raise KvplanError(f"unknown GPU {name!r}",
                          "use a name from `kvplan gpus` or give its memory with --gpu-mem-mib")
    return GPU(name=g["name"], total_mib=int(g["total_mib"]), vendor=g.get("vendor", "nvidia"),
               source=g.get("source"))


def catalog_gpus() -> list[dict]:
    """Every catalog entry once (name, total_mib, aliases, vendor, source), by name (``kvplan gpus``)."""
    return sorted({id(v): v for v in _index().values()}.values(), key=lambda g: g["name"])
