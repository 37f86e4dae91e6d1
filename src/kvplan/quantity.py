"""Memory sizes as deployment files write them, to bytes.

- Kubernetes quantities: ``400Gi`` (2^30), ``20G`` (10^9), ``512Mi``, ``1e9``, plain bytes
  (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/).
- Docker / Compose: ``400g``, ``32gb``, ``64m``, ``1024k``, plain bytes; the letters are binary (docker's
  ``units.RAMInBytes``: b, k, m, g, t, p are powers of 1024).
- Slurm ``--mem``: a number in MB (MiB) by default, suffixes K, M, G, T (powers of 1024); ``0`` = all of the node.
"""

from __future__ import annotations

import math
import re

from kvplan.errors import KvplanError

_K8S = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
        "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60, "m": 1e-3}
_K8S_RE = re.compile(r"^([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_DOCKER_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([bkmgtp]?)(?:i?b)?$", re.IGNORECASE)
_SLURM_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGT]?)B?$", re.IGNORECASE)
MAX_BYTES = 2**60


def _checked(value: float, text: str, what: str) -> int:
    if not math.isfinite(value) or value < 0 or value >= MAX_BYTES:
        raise KvplanError(f"{what}: size {text!r} is out of range")
    return int(value)


def k8s_bytes(text: object, what: str = "memory") -> int:
    s = str(text).strip()
    m = _K8S_RE.match(s)
    if not m:
        raise KvplanError(f"{what}: {s!r} is not a Kubernetes quantity", "write it like 400Gi or 20G")
    return _checked(float(m.group(1)) * _K8S[m.group(2) or ""], s, what)


def docker_bytes(text: object, what: str = "size") -> int:
    s = str(text).strip()
    m = _DOCKER_RE.match(s)
    if not m:
        raise KvplanError(f"{what}: {s!r} is not a Docker size", "write it like 32g or 64m")
    power = "bkmgtp".index(m.group(2).lower() or "b")
    return _checked(float(m.group(1)) * 1024**power, s, what)


def slurm_mem_bytes(text: str, what: str = "--mem") -> int:
    """Bytes of a Slurm memory size; 0 stays 0 (the caller reads it as 'all of the node')."""
    s = text.strip()
    m = _SLURM_RE.match(s)
    if not m:
        raise KvplanError(f"{what}: {s!r} is not a Slurm memory size", "write it like 400G or 409600")
    power = {"": 2, "K": 1, "M": 2, "G": 3, "T": 4}[m.group(2).upper()]
    return _checked(float(m.group(1)) * 1024**power, s, what)
