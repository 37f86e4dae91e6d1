"""The SGLang free-memory baseline T (engines/sglang/baseline.py) against the real logs in baseline_data.py.

The expected context/communicator values are the logs' own figures averaged by hand below; the band and
leave-one-out checks can fail when a log is added that the mechanism does not explain.
"""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.engines.sglang.baseline import baseline_overhead, link_class, residuals
from kvplan.engines.sglang.baseline_data import POINTS

GiB = 2**30


def test_cuda_tp1_is_the_mean_context_of_the_logs():
    # CUDA context per log (total - T [- 'Init torch distributed' usage]), GiB:
    #   PR 4760 H100: 79.647 - 78.59 = 1.057; docs v0.4.1: 79.647 - 78.81 = 0.837; #7227 RTX 5090: 31.843 - 30.77
    #   = 1.073; 96 GB TP1: 95.577 - 94.63 - 0.00 = 0.947; PR 11716 H200 TP8: 140.401 - 137.29 - 2.01 = 1.101;
    #   HGX 80 GB TP8: 79.647 - 77.43 - 1.25 = 0.967  -> mean 0.997
    e = baseline_overhead("NVIDIA H100 80GB HBM3", 1)
    assert e.value_gib == pytest.approx((1.057 + 0.837 + 1.073 + 0.947 + 1.101 + 0.967) / 6, abs=0.003)
    assert e.low_bytes < e.value_bytes < e.high_bytes


def test_nvswitch_tp8_adds_the_mean_communicators():
    # communicators of the NVSwitch logs: 2.01 and 1.25 (printed), 140.401 - 137.92 - 0.997 = 1.484 (H200 PP4),
    # 140.401 - 138.09 - 0.997 = 1.314 (TP16 on 2 nodes) -> mean 1.515; TP does not scale it (8 == 4 == 2)
    e8 = baseline_overhead("NVIDIA H200", 8)
    assert e8.value_gib == pytest.approx(0.997 + (2.01 + 1.25 + 1.484 + 1.314) / 4, abs=0.005)
    assert baseline_overhead("NVIDIA H200", 2).value_bytes == e8.value_bytes


def test_single_log_classes_use_their_own_transport():
    # RTX PRO 6000 (PCIe with P2P: NCCL buffers in GPU memory) and RTX 4090 (no P2P: SHM buffers in host memory)
    # have one multi-GPU log each; each class keeps its own: 95.593 - 93.9 - 0.997 = 0.696 and
    # 23.988 - 22.84 - 0.997 = 0.151 (context 0.997 = mean of the 6 CUDA TP1 logs)
    a = baseline_overhead("NVIDIA RTX PRO 6000 Blackwell Server Edition", 8)
    b = baseline_overhead("NVIDIA GeForce RTX 4090", 2)
    assert a.value_gib == pytest.approx(0.997 + 0.696, abs=0.005)
    assert b.value_gib == pytest.approx(0.997 + 0.151, abs=0.005)
    # one log each: the band is widened (at least half the value either side of the communicators)
    assert (a.high_bytes - a.low_bytes) / GiB >= 0.696


def test_unknown_gpu_falls_back_with_a_wider_band():
    known = baseline_overhead("NVIDIA H100 80GB HBM3", 4)
    unknown = baseline_overhead("custom GPU", 4)
    assert unknown.high_bytes - unknown.low_bytes > known.high_bytes - known.low_bytes
    assert "no 'unknown' log" in unknown.source


@pytest.mark.parametrize("name, link", [
    ("NVIDIA H100 80GB HBM3", "nvswitch"), ("NVIDIA H200", "nvswitch"), ("NVIDIA B300 SXM6 AC", "nvswitch"),
    ("NVIDIA A100-SXM4-80GB", "nvswitch"), ("NVIDIA GH200 480GB", "nvswitch"), ("NVIDIA H100 NVL", "pcie-p2p"),
    ("NVIDIA H100 PCIe", "pcie-p2p"), ("NVIDIA L40S", "pcie-p2p"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                                                    "pcie-p2p"),
    ("NVIDIA GeForce RTX 4090", "geforce"), ("AMD Instinct MI355X", "rocm"), ("custom GPU", "unknown"),
])
def test_link_class(name, link):
    assert link_class(name)[1] == link


def test_every_log_inside_its_band_and_held_out_logs_close():
    inside = residuals()
    assert len(inside) == len(POINTS) and all(r.inside for r in inside)
    loo = residuals(leave_one_out=True)
    assert sum(r.inside for r in loo) / len(loo) >= 0.8
    assert max(abs(r.residual_gib) for r in loo) < 1.25


def test_plan_uses_the_baseline():
    r = check(["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-70B", "--tp", "8",
               "--mem-fraction-static", "0.85"], gpu="h200", host_mem_gib=1000, engine_version="0.5.9")
    expected = 143771 * 2**20 - baseline_overhead("NVIDIA H200", 8).value_bytes
    assert r.plan.per_rank.static.baseline_free_bytes == expected
    assert any("context and communicators" in a for a in r.plan.assumptions)
