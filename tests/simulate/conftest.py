"""GPU figures the simulator's roofline needs, until the catalog's ``hardware.gpus.gpu_perf`` lands (branch
``catalog``). The interface is that function's: ``gpu_perf(name_or_alias) -> GpuPerf(mem_bw_gbps,
bf16_dense_tflops, fp8_dense_tflops, source)``. The fallback is installed only when the catalog has no such
function, and only for these GPUs:

NVIDIA RTX PRO 6000 Blackwell Server Edition (GB202, 188 SMs, 96 GB GDDR7 on a 512-bit bus at 28 Gbps):
  * memory bandwidth 1,792 GB/s = 512 bit × 28 Gb/s / 8: NVIDIA's launch specification as reported in
    https://www.purepc.pl/nvidia-rtx-pro-6000-rtx-pro-6000-max-q-rtx-pro-5000-rtx-pro-4500-oraz-rtx-pro-4000-profesjonalne-karty-graficzne-blackwell
    and https://gpu.name/posts/nvidia-unveils-rtx-pro-6000-blackwell-gpu-with-24-064-cores-and-96gb-memory
  * dense tensor throughput: BF16 503.8 TFLOP/s, FP8 1,007.6 TFLOP/s (FP32 accumulate), i.e. NVIDIA's "4,000 AI TOPS"
    (FP4, sparse) / 8 and / 4: https://hmc-tech.com/gpu/nvidia-rtx-pro-6000-blackwell-vs-amd-radeon-pro-duo-polaris
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kvplan.errors import KvplanError


@dataclass(frozen=True)
class GpuPerf:
    mem_bw_gbps: float
    bf16_dense_tflops: float
    fp8_dense_tflops: float
    source: str


FALLBACK = {
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": GpuPerf(
        1792.0, 503.8, 1007.6, "test fallback: RTX PRO 6000 Blackwell Server Edition datasheet figures"),
}


def _fallback(name: str) -> GpuPerf:
    from kvplan.hardware.gpus import lookup_gpu

    g = lookup_gpu(name)
    if g.name not in FALLBACK:
        raise KvplanError(f"no performance figures for {g.name}")
    return FALLBACK[g.name]


@pytest.fixture(autouse=True, scope="session")
def gpu_perf():
    """The catalog's gpu_perf when it exists, else the fallback table above (for module fixtures too)."""
    from kvplan.hardware import gpus

    with pytest.MonkeyPatch.context() as mp:
        if not hasattr(gpus, "gpu_perf"):
            mp.setattr(gpus, "gpu_perf", _fallback, raising=False)
        yield
