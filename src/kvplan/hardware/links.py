"""The GPU-to-GPU link class of a GPU, from the name nvidia-smi / amd-smi prints: what NCCL/RCCL and the engines'
custom all-reduce allocate per rank depends on it (NVLS multicast buffers on NVSwitch boards, P2P buffers in GPU
memory on PCIe cards with P2P, host-memory SHM transport on GeForce cards without P2P)."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["link_class"]


@lru_cache(maxsize=256)
def link_class(gpu_name: str | None) -> tuple[str, str]:
    """(platform, link) of a GPU from the name nvidia-smi / amd-smi prints: link is "nvswitch" (SXM/HGX boards),
    "pcie-p2p" (data-center and workstation PCIe cards, NVL pairs), "geforce" (no P2P), "rocm", or "unknown"."""
    n = (gpu_name or "").strip()
    if re.search(r"\bAMD\b|Instinct|^MI\d", n, re.IGNORECASE):
        return "rocm", "rocm"
    if not n or n.lower().startswith("custom"):
        return "cuda", "unknown"
    if re.search(r"GeForce", n, re.IGNORECASE):
        return "cuda", "geforce"
    if re.search(r"NVL|PCIe|PCIE", n):
        return "cuda", "pcie-p2p"
    if re.search(r"SXM|HBM3|\bH200\b|\bH800\b|\bH20\b|H20-3e|\bB200\b|\bB300\b|GB200|GB300|GH200", n):
        return "cuda", "nvswitch"
    return "cuda", "pcie-p2p"
