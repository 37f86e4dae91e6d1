"""Other tenants (issue 25 item 4): what this machine's other processes already hold when kvplan plans it (the race
of ranks that read one free-memory figure: test_host_race.py).

Ground truth: a fake /proc/meminfo written here (``detect.MEMINFO``) with MemAvailable also given to
``detect.host_available_bytes`` (what psutil reads from the same file)."""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.hardware import detect
from kvplan.units import GiB

CPU = ["VLLM_CPU_KVCACHE_SPACE=2", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "4096"]
SG = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "2",
      "--enable-hierarchical-cache"]
TOTAL_KB, AVAILABLE_KB = 64 * 1024 * 1024, 40 * 1024 * 1024  # 64 GiB, 40 GiB: 24 GiB held by other tenants


@pytest.fixture
def meminfo(tmp_path, monkeypatch):
    f = tmp_path / "meminfo"
    f.write_text(f"MemTotal:       {TOTAL_KB} kB\nMemFree:         1048576 kB\nMemAvailable:   {AVAILABLE_KB} kB\n"
                 "Buffers:           58172 kB\nHugePages_Total:       0\n")
    monkeypatch.setattr(detect, "MEMINFO", str(f))
    monkeypatch.setattr(detect, "host_available_bytes", lambda: AVAILABLE_KB * 1024)
    monkeypatch.setattr(detect, "detect_gpus", lambda: [])
    return f


def test_planning_this_machine_says_what_others_hold(meminfo):
    from kvplan.ledger import node_ledger
    from kvplan.report.ledger import summary

    r = check(CPU, engine_version="0.32.0")  # vLLM-CPU plans the machine it runs on
    n = r.plan.per_node
    assert n.host_available_source.startswith("this machine's MemAvailable")
    assert n.host_available_bytes == 40 * GiB and n.host_others_bytes == 24 * GiB and n.host_total_bytes == 64 * GiB
    led = r.to_dict()["per_node"]["host_ledger"]
    assert led["held_by_others_bytes"] == 24 * GiB and led["node_total_bytes"] == 64 * GiB
    assert "MemTotal − MemAvailable" in led["held_by_others_source"]
    # beside the budget, never in it: the steady total is the launch's rows alone
    assert led["steady_bytes"] == sum(row["node_bytes"] for row in led["rows"]
                                      if "steady" in row["phases"] and row["memory"] != "page cache")
    lines = summary(node_ledger(r.plan))  # check's lines under the "Host ledger (one node)" table
    assert any(ln.startswith("already held by other processes (and the kernel) on this node: 24.0 GiB of 64.0 GiB")
               for ln in lines), lines


def test_other_machines_and_given_hosts_say_nothing_of_this_ones_tenants(meminfo):
    for r in (check(CPU, engine_version="0.32.0", host_mem_gib=100),
              check([*SG, "--hicache-size", "10"], gpu="h100", engine_version="0.5.9"),
              check([*SG, "--hicache-size", "10"], gpu="h100", engine_version="0.5.9", host_mem_gib=100)):
        d = r.to_dict()["per_node"]
        assert r.plan.per_node.host_others_bytes is None
        assert "host_others_bytes" not in d and "held_by_others_bytes" not in d["host_ledger"]


def test_meminfo_without_memavailable_is_unknown(tmp_path):
    f = tmp_path / "meminfo"
    f.write_text("MemTotal:       1000 kB\nMemFree:         500 kB\n")
    assert detect.held_by_others(str(f)) is None
    assert detect.held_by_others(str(tmp_path / "missing")) is None
    f.write_text("MemTotal:       1000 kB\nMemAvailable:    250 kB\n")
    assert detect.held_by_others(str(f)) == (750 * 1024, 1000 * 1024)


def test_the_html_ledger_says_it_too(meminfo):
    from kvplan.report.html.ledger import ledger_chart

    c = ledger_chart(check(CPU, engine_version="0.32.0").to_dict())
    assert c is not None
    lines = [line for line, _bad in c.summary if line.startswith("already held by other processes")]
    assert lines and "24.00 GiB of 64.00 GiB" in lines[0] and "MemTotal − MemAvailable" in lines[0]
    assert not [line for line, _bad in ledger_chart(check(CPU, engine_version="0.32.0", host_mem_gib=100)
                                                     .to_dict()).summary if "already held" in line]
