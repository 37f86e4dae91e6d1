"""SGLang inside a deployment: its images, the environment it reads, and what its host check knows of a cgroup.

- Images: ``lmsysorg/sglang`` (and ROCm's ``rocm/sgl-dev``, ``lmsysorg/sglang-rocm``) set no ENTRYPOINT: a manifest
  always gives the command (https://github.com/sgl-project/sglang/blob/v0.5.9/docker/Dockerfile ends with no
  ENTRYPOINT/CMD); so no entrypoint is listed here.
- Environment: ``SGLANG_*`` and the older ``SGL_*`` (``python/sglang/srt/environ.py``, ``envs.SGLANG_...``).
- Host check vs. cgroup (``hicache.py`` has the per-version check): up to 0.5.20 it reads
  ``psutil.virtual_memory().available``, the node's figure (a container's /proc/meminfo shows the host's), so a
  container's memory limit is invisible to it; 0.5.23's ``available_host_memory_bytes`` takes
  min(psutil available, cgroup headroom) and refuses with "Not enough host memory available"
  (https://github.com/sgl-project/sglang/pull/35540 for the per-rank split; reference sglang-memory.md §2.3).
"""

from __future__ import annotations

from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Plan

IMAGE_HINTS = ("sglang", "sgl-")
ENV_PREFIXES = ("SGLANG_", "SGL_")


def cgroup_note(plan: Plan) -> str | None:
    hc = sglang_settings(plan).hicache
    if not hc.enabled:
        return None
    if hc.host_check == "split-by-ranks-cgroup":
        return (f"SGLang {plan.engine_version} reads the cgroup headroom in its host check and refuses to start "
                "('Not enough host memory available') when the pools do not fit it")
    return (f"SGLang {plan.engine_version}'s host check reads psutil's available memory, which in a container is the "
            "node's, not the cgroup limit: nothing stops the ranks pinning their pools until the kernel OOM-kills "
            "the container (restart loop)")
