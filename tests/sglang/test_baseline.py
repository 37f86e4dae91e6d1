"""The SGLang free-memory baseline T (engines/sglang/baseline.py) against the real logs in baseline_data.py.

The expected context/communicator values are the logs' own figures averaged by hand below; the band and
leave-one-out checks can fail when a log is added that the mechanism does not explain.
"""

from __future__ import annotations

from statistics import median

import pytest

from kvplan import check
from kvplan.engines.sglang.baseline import baseline_overhead, link_class, residuals
from kvplan.engines.sglang.baseline_data import POINTS

GiB = 2**30


# (memory.total GiB, T, communicators printed) of the CUDA logs that give the context: TP1 logs, and multi-GPU
# logs that print "Init torch distributed ends. mem usage" (baseline_data.py, figures copied from the logs by hand)
CUDA_CONTEXT_LOGS = [
    (79.647, 78.59, 0), (79.647, 78.81, 0), (31.843, 30.77, 0), (95.577, 94.63, 0), (140.401, 137.29, 2.01),
    (79.647, 77.43, 1.25), (23.988, 22.93, 0.19), (47.988, 46.74, 0.19), (95.593, 94.01, 0.39), (44.988, 44.02, 0),
    (22.488, 21.82, 0), (24.0, 22.76, 0), (23.988, 22.46, 0), (31.843, 30.68, 0), (40.0, 38.87, 0),
    (93.584, 92.50, 0), (79.647, 78.43, 0.09),
]
CTX = median(t - f - c for t, f, c in CUDA_CONTEXT_LOGS)
# communicators of the NVSwitch logs, GiB: 2.01 and 1.25 (printed), then total - T - context for the H200 PP4 log,
# the TP16 log on 2 nodes and the H20 TP8 log
NVSWITCH_COMM = [2.01, 1.25, 140.401 - 137.92 - CTX, 140.401 - 138.09 - CTX, 95.577 - 93.56 - CTX]


def test_cuda_tp1_is_the_mean_context_of_the_logs():
    assert 1.0 < CTX < 1.15  # ~1.07 GiB (the median of the logs)
    e = baseline_overhead("NVIDIA H100 80GB HBM3", 1)
    assert e.value_gib == pytest.approx(CTX, abs=0.003)
    assert e.low_bytes < e.value_bytes < e.high_bytes


def test_nvswitch_tp8_adds_the_mean_communicators():
    # the median of the NVSwitch logs' communicators (NVSWITCH_COMM); TP does not scale it (8 == 4 == 2)
    e8 = baseline_overhead("NVIDIA H200", 8)
    assert e8.value_gib == pytest.approx(CTX + median(NVSWITCH_COMM), abs=0.005)
    assert baseline_overhead("NVIDIA H200", 2).value_bytes == e8.value_bytes


def test_pcie_communicators_grow_with_the_peers_geforce_do_not():
    # PCIe with P2P: NCCL P2P buffers in GPU memory per peer; per-peer figures of the logs: the incident's implied
    # TP8 (95.593 - 93.9 - CTX) / 7, A100 PCIe TP2 (80.0 - 78.77 - CTX) / 1, RTX 6000 Ada TP4 0.19 / 3 (printed),
    # RTX 5880 Ada TP4 (47.988 - 46.70 - CTX) / 3, RTX PRO 6000 TP4 0.39 / 3 (printed)
    per_peer = [(95.593 - 93.9 - CTX) / 7, (80.0 - 78.77 - CTX) / 1, 0.19 / 3, (47.988 - 46.70 - CTX) / 3, 0.39 / 3]
    k = median(per_peer)
    a8 = baseline_overhead("NVIDIA RTX PRO 6000 Blackwell Server Edition", 8)
    a4 = baseline_overhead("NVIDIA RTX PRO 6000 Blackwell Server Edition", 4)
    assert a8.value_gib == pytest.approx(CTX + 7 * k, abs=0.005)
    assert a4.value_gib == pytest.approx(CTX + 3 * k, abs=0.005)
    # GeForce (no P2P: SHM buffers in host memory): 23.988 - 22.84 - CTX (TP2, older log) and 0.19 (printed)
    b = baseline_overhead("NVIDIA GeForce RTX 4090", 2)
    assert b.value_gib == pytest.approx(CTX + median([23.988 - 22.84 - CTX, 0.19]), abs=0.005)
    assert baseline_overhead("NVIDIA GeForce RTX 4090", 8).value_bytes == b.value_bytes
    # two logs only: the band is widened (at least half the value either side of the communicators)
    assert (b.high_bytes - b.low_bytes) / GiB >= 0.5 * 0.1


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
    ("NVIDIA GeForce RTX 4090", "geforce"), ("NVIDIA L4", "geforce"), ("AMD Instinct MI355X", "rocm"),
    ("custom GPU", "unknown"),
])
def test_link_class(name, link):
    assert link_class(name)[1] == link


def test_l4_communicators_do_not_grow_with_peers():
    """L4 hosts (AWS g6) have no PCIe P2P: NCCL's SHM transport keeps its buffers in host memory, so the TP4
    communicators are the no-P2P class's (not 3 x the per-peer P2P figure)."""
    l4, l40s = baseline_overhead("NVIDIA L4", 4), baseline_overhead("NVIDIA L40S", 4)
    assert l4.value_bytes == baseline_overhead("NVIDIA GeForce RTX 4090", 4).value_bytes
    assert l4.value_bytes < l40s.value_bytes
    assert "geforce communicators" in l4.source


def test_every_log_inside_its_band_and_held_out_logs_close():
    inside = residuals()
    assert len(inside) == len(POINTS) and all(r.inside for r in inside)
    loo = residuals(leave_one_out=True)
    assert sum(r.inside for r in loo) / len(loo) >= 0.8
    assert max(abs(r.residual_gib) for r in loo) < 1.25


def test_plan_uses_the_baseline():
    r = check(["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-70B", "--tp", "8",
               "--mem-fraction-static", "0.85"], gpu="h200", host_mem_gib=1000, engine_version="0.5.9")
    # H200: 143,771 MiB of memory.total (nvidia-smi), less the context and the NVSwitch communicators of the logs
    expected_gib = 143771 / 1024 - (CTX + median(NVSWITCH_COMM))
    assert r.plan.per_rank.static.baseline_free_bytes / GiB == pytest.approx(expected_gib, abs=0.005)
    assert any("context and communicators" in a for a in r.plan.assumptions)
