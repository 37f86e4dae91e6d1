"""ranks-exceed-node: SGLang places tp x pp // nnodes ranks on every node (engine.py::_launch_scheduler_processes)."""

from __future__ import annotations

import pytest

from kvplan import check

SG = ["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-70B"]


def ids(extra: list[str], **opts) -> list[str]:
    r = check(SG + extra, gpu="h100", host_mem_gib=1000, engine_version="0.5.9", **opts)
    return [f.id for f in r.findings]


@pytest.mark.parametrize("extra, opts, expected", [
    (["--tp", "16"], {}, True),  # 16 ranks on one node of (assumed) 8 GPUs
    (["--tp", "16", "--nnodes", "2", "--node-rank", "0"], {}, False),  # 8 per node
    (["--tp", "16"], {"gpus_per_node": 16}, False),  # a 16-GPU node
    (["--tp", "8"], {}, False),
    (["--tp", "8", "--pp", "2"], {}, True),  # 16 ranks, nnodes 1
    (["--tp", "4", "--dp", "4"], {}, True),  # plain DP: 4 replicas of TP4 on one node
    (["--tp", "8", "--dp", "8", "--enable-dp-attention"], {}, False),  # DP attention splits TP: 8 ranks
])
def test_ranks_per_node(extra, opts, expected):
    assert ("ranks-exceed-node" in ids(extra, **opts)) is expected


def test_message_names_the_ranks_and_the_fix():
    r = check(SG + ["--tp", "16"], gpu="h100", host_mem_gib=1000, engine_version="0.5.9")
    f = next(f for f in r.findings if f.id == "ranks-exceed-node")
    assert f.severity == "error" and "16 ranks on each node" in f.message and "--nnodes 2" in f.fix
    assert r.verdict == "fail" and r.exit_code == 1
