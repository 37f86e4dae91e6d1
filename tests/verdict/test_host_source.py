"""Whose host (issue 13 item 2): a plan for other hardware never takes this machine's MemAvailable.

Ground truth: the rule itself (the node's memory is unknown unless given) and this machine's own state, replaced by
sentinels: ``detect.host_available_bytes`` returns a value no real host has, so any figure that equals it came from
this machine."""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.hardware import detect
from kvplan.units import GiB

SENTINEL = 12_345 * GiB + 7  # "this machine's MemAvailable" in these tests
SG = ["python", "-m", "sglang.launch_server", "--model-path"]
KIMI = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "300"]


@pytest.fixture
def here(monkeypatch):
    """This machine: MemAvailable = SENTINEL, /dev/shm 1 GiB, GPUs as the test sets them (none by default)."""
    gpus: list[tuple[str, int]] = []
    monkeypatch.setattr(detect, "host_available_bytes", lambda: SENTINEL)
    monkeypatch.setattr(detect, "shm_bytes", lambda path="/dev/shm": GiB)
    monkeypatch.setattr(detect, "detect_gpus", lambda: list(gpus))
    return gpus


def test_remote_gpu_without_host_mem_is_unknown(here):
    r = check(KIMI, gpu="h200", engine_version="0.5.9")
    n, c = r.plan.per_node, r.plan.cluster
    assert n.host_available_bytes is None and c.host_mem_gib is None
    assert n.host_available_source.startswith("not given") and "h200" in n.host_available_source
    assert n.shm_bytes is None
    d = r.to_dict()
    assert d["per_node"]["host_available_bytes"] is None and d["per_node"]["host_available_gib"] is None
    assert str(SENTINEL) not in str(d) and "12,345" not in str(d)
    host = [f for f in r.findings if f.id == "host-oversubscribed"]
    assert host and host[0].severity == "info" and "not given" in host[0].message and not host[0].flags
    # nothing sized from this machine: no --hicache-size fix, no error, no suggested command
    assert r.plan.settings.host_fix is None
    assert r.verdict != "fail" and r.suggested_command is None


def test_remote_gpu_with_host_mem_uses_it(here):
    r = check(KIMI, gpu="h200", engine_version="0.5.9", host_mem_gib=449)
    assert r.plan.per_node.host_available_bytes == 449 * GiB
    assert r.plan.per_node.host_available_source == "--host-mem-gib"
    assert r.verdict == "fail"


def test_gpu_of_this_machine_uses_memavailable(here):
    here.append(("NVIDIA H200", 143771))  # NVML's name and memory.total of an H200
    r = check(KIMI, gpu="h200", engine_version="0.5.9")
    n = r.plan.per_node
    assert n.host_available_bytes == SENTINEL
    assert n.host_available_source.startswith("this machine's MemAvailable") and "this machine's GPU" in \
        n.host_available_source
    assert n.shm_bytes == GiB


def test_other_gpu_on_this_machine_is_not_local(here):
    here.append(("NVIDIA H100 80GB HBM3", 81559))
    r = check(KIMI, gpu="h200", engine_version="0.5.9")
    assert r.plan.per_node.host_available_bytes is None


def test_detected_gpu_is_local(here):
    here.extend([("NVIDIA H200", 143771)] * 8)
    r = check(KIMI, engine_version="0.5.9")
    assert r.plan.per_node.host_available_bytes == SENTINEL
    assert "detected here" in r.plan.per_node.host_available_source


def test_local_host_flag_forces_this_machine(here):
    r = check(KIMI, gpu="h200", engine_version="0.5.9", local_host=True)
    assert r.plan.per_node.host_available_bytes == SENTINEL
    assert "--local-host" in r.plan.per_node.host_available_source


def test_several_nodes_are_other_machines(here):
    here.append(("NVIDIA H200", 143771))
    r = check([*KIMI[:-4], "--tp", "16", "--enable-hierarchical-cache", "--hicache-size", "10"], gpu="h200",
              engine_version="0.5.9", nodes=2)
    assert r.plan.per_node.host_available_bytes is None and "--nodes 2" in r.plan.per_node.host_available_source


def test_vllm_remote_gpu_is_unknown_too(here):
    r = check(["vllm", "serve", "meta-llama/Llama-3.1-70B", "-tp", "4", "--kv-offloading-size", "64"], gpu="h100",
              engine_version="0.27.0")
    assert r.plan.per_node.host_available_bytes is None
    assert r.plan.settings.host_fix is None
    assert not [f for f in r.findings if f.severity == "error" and f.id.startswith("host")]


def test_cli_says_the_source(here):
    import io
    import json
    from contextlib import redirect_stdout

    from kvplan.cli.main import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["check", "--gpu", "h200", "--engine-version", "0.5.9", "--json", "--", *KIMI])
    d = json.loads(buf.getvalue())
    assert code == 0
    assert d["cluster"]["host_mem_source"].startswith("not given")
    assert d["per_node"]["host_available_source"].startswith("not given")
