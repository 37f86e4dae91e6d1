"""The GPU-to-GPU link class of a GPU, from the name nvidia-smi / amd-smi prints: what NCCL/RCCL and the engines'
custom all-reduce allocate per rank depends on it (NVLS multicast buffers on NVSwitch boards, P2P buffers in GPU
memory on PCIe cards with P2P, host-memory SHM transport on GeForce cards without P2P)."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["link_class"]


# Data-center PCIe cards sold into clouds whose hosts expose no PCIe P2P between them: NCCL falls back to its SHM
# transport (buffers in host memory) like on GeForce cards, so they share that link class ("geforce": no P2P).
# NVIDIA L4: AWS g6 hosts have neither NVLink nor PCIe P2P (https://github.com/llm-d-incubation/llm-d-infra/
# pull/181, "aws G6 does not support nvlink / p2p": "peer access is not supported between these two devices").
NO_P2P = frozenset({"NVIDIA L4"})


@lru_cache(maxsize=256)
def link_class(gpu_name: str | None) -> tuple[str, str]:
    """(platform, link) of a GPU from the name nvidia-smi / amd-smi prints: link is "nvswitch" (SXM/HGX boards),
    "pcie-p2p" (data-center and workstation PCIe cards, NVL pairs), "geforce" (GeForce and ``NO_P2P`` cards: no
    P2P), "rocm", or "unknown"."""
    n = (gpu_name or "").strip()
    if re.search(r"\bAMD\b|Instinct|^MI\d", n, re.IGNORECASE):
        return "rocm", "rocm"
    if not n or n.lower().startswith("custom"):
        return "cuda", "unknown"
    if re.search(r"GeForce", n, re.IGNORECASE) or n in NO_P2P:
        return "cuda", "geforce"
    if re.search(r"NVL|PCIe|PCIE", n):
        return "cuda", "pcie-p2p"
    if re.search(r"SXM|HBM3|\bH200\b|\bH800\b|\bH20\b|H20-3e|\bB200\b|\bB300\b|GB200|GB300|GH200", n):
        return "cuda", "nvswitch"
    return "cuda", "pcie-p2p"
