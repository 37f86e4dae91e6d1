"""gpu-util-startup-fail (error): vLLM requests ceil(total × gpu_memory_utilization) per GPU and refuses to
start when less than that is free at startup (v1/worker/utils.py::request_memory; engines/vllm/startup.py, the
reserves in engines/vllm/calibration.py)."""

from __future__ import annotations

import math

from kvplan.engines.base import FindingContext
from kvplan.engines.vllm.settings import vllm_settings
from kvplan.engines.vllm.startup import rule_total_and_free_bytes
from kvplan.result import Finding
from kvplan.units import GiB

ID = "gpu-util-startup-fail"


def check(ctx: FindingContext) -> list[Finding]:
    p, s = ctx.plan, vllm_settings(ctx.plan)
    req = s.requested_bytes_per_rank
    if not req or s.platform != "cuda":
        return []
    total, free = rule_total_and_free_bytes(p.cluster.gpu_mem_mib * 2**20, p.cluster.gpu)
    if req <= free:
        return []
    gmu = math.floor(free / total * 100) / 100
    util = s.gpu_memory_utilization
    return [Finding(ID, "error", f"per GPU: vLLM requests {req / GiB:.2f} GiB (utilization {util}"
                    f" × {total / GiB:.2f} GiB) but only about {free / GiB:.2f} GiB is free after the CUDA context",
                    f"--gpu-memory-utilization {gmu}", {"--gpu-memory-utilization": f"{gmu}"})]
