"""The charts' figures, checked against the JSON they are drawn from and against hand arithmetic (no browser).

Incident (README, seeds): Kimi-K2.5 TP8 on RTX PRO 6000 Blackwell (97,887 MiB per GPU), --mem-fraction-static 0.93,
--hicache-size 300 (decimal GB per rank) on a 449 GiB host, SGLang 0.5.9 with its 10 GiB host reserve.
"""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.report.html import fmt
from kvplan.report.html.gpu import gpu_chart
from kvplan.report.html.host import host_chart
from kvplan.report.html.stacked import layout
from tests.conftest import INCIDENT_CMD

GiB, MiB = 2**30, 2**20
HW = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "host_mem_gib": 449, "engine_version": "0.5.9"}


@pytest.fixture(scope="module")
def incident() -> dict:
    return check(INCIDENT_CMD, **HW).to_dict()


def test_formats_by_hand():
    assert fmt.gib(17.765 * GiB) == "17.77 GiB" and fmt.gib(449 * GiB) == "449 GiB"
    assert fmt.gib(350.2 * GiB) == "350.2 GiB"
    assert fmt.host(8 * 300e9) == "2.40 TB (2,235 GiB)"  # 2.4e12 / 2^30 = 2235.17
    assert fmt.host(300e9) == "300.0 GB (279.4 GiB)"
    assert fmt.ticks(95.6) == [0, 20, 40, 60, 80] and fmt.ticks(2245)[-1] == 2000


def test_gpu_bar_adds_up_to_the_gpu(incident):
    c = gpu_chart(incident)
    r = incident["per_rank"]
    total = 97_887 * MiB  # the catalog's nvidia-smi total for this GPU
    segs = {s.key: s.bytes for s in c.rows[0].segments}
    assert len(c.rows) == 8  # 8 ranks on the node
    assert sum(segs.values()) == total  # nothing drawn that the GPU does not have (headroom >= 0 here)
    assert segs["before"] == total - r["baseline_free_bytes"]
    for key, field in (("weights", "weights_bytes"), ("kv_pool", "kv_pool_bytes"),
                       ("req_to_token", "req_to_token_bytes"), ("cuda_graphs", "cuda_graph_bytes"),
                       ("activations", "headroom_after_graphs_bytes")):
        assert segs[key] == r[field]
    assert segs["cuda_graphs"] == int(3.75 * GiB)  # the incident log's 'Capture cuda graph end ... mem usage=3.75 GB'
    (mark,) = c.marks
    assert mark.at == segs["before"] + int(r["baseline_free_bytes"] * 0.93)
    low, high = sorted(c.bands, key=lambda b: b.start)
    assert (low.start, low.end) == (segs["before"], segs["before"] + r["weights_bytes"])
    # the fraction at which req_to_token + graphs stop fitting: 0.93 + 0.62 GiB / 93.48 GiB ≈ 0.9367
    assert high.start == mark.at + r["headroom_after_graphs_bytes"] and high.end == total
    assert abs((high.start - segs["before"]) / r["baseline_free_bytes"] - (0.93 + 0.6228 / 93.483)) < 1e-3
    assert c.over is None


def test_host_bar_draws_the_oversubscription(incident):
    c = host_chart(incident)
    pools = [s for s in c.rows[0].segments if s.key.startswith("rank")]
    assert len(pools) == 8 and all(s.bytes == incident["per_rank"]["host_kv_pinned_bytes"] for s in pools)
    assert abs(sum(s.bytes for s in pools) - 2.4e12) < 1e6  # 8 × 300 GB (token-rounded)
    assert c.capacity.at == 449 * GiB and c.capacity.label == "node memory available 449 GiB"
    # pools + 10 GiB reserve beyond 449 GiB: 2.4e12 + 10 GiB - 449 GiB = 1.928e12 bytes, drawn in red
    assert c.over.start == 449 * GiB and abs(c.over.end - c.over.start - (2.4e12 + 10 * GiB - 449 * GiB)) < 1e6
    text = " ".join(t for t, _ in c.summary)
    assert "2.40 TB (2,235 GiB)" in text and "449 GiB" in text and "oversubscribed by 1.93 TB" in text


def test_svg_positions_follow_the_bytes(incident):
    svg = layout(gpu_chart(incident))
    rects = [e["attrs"] for e in svg.elements if e["tag"] == "rect" and e["attrs"].get("class") == "seg"]
    row0 = [a for a in rects if a["data-row"] == 0]
    widths = {a["data-key"]: a["width"] for a in row0}
    bytes_ = {a["data-key"]: a["data-bytes"] for a in row0}
    px_per_byte = widths["weights"] / bytes_["weights"]
    assert abs(widths["kv_pool"] - bytes_["kv_pool"] * px_per_byte) < 0.05
    xs = [a["x"] for a in row0]
    assert xs == sorted(xs)  # stacked left to right


def test_a_plan_that_does_not_fit_overflows_the_gpu():
    d = check(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
               "--mem-fraction-static", "0.99"], gpu="h100", host_mem_gib=1024, engine_version="0.5.9").to_dict()
    c = gpu_chart(d)
    act = d["per_rank"]["headroom_after_graphs_bytes"]
    assert act < 0  # 1 % of P (< 0.8 GiB) cannot hold req_to_token and the CUDA graphs
    assert c.over is not None and c.over.end - c.over.start == -act
    assert any(bad for _, bad in c.summary)


def test_vllm_bar_and_bands():
    d = check(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--kv-offloading-size", "64"], gpu="h100",
              host_mem_gib=1024, engine_version="0.27.0").to_dict()
    s, r = d["settings"], d["per_rank"]
    c = gpu_chart(d)
    segs = {x.key: x.bytes for x in c.rows[0].segments}
    assert sum(segs.values()) == 81_559 * MiB  # H100 80GB HBM3 nvidia-smi total
    assert segs["kv_pool"] == r["kv_pool_bytes"] and segs["left"] == 81_559 * MiB - s["requested_bytes_per_rank"]
    assert c.marks[0].at == s["requested_bytes_per_rank"]
    # 0.92 asks for ceil(0.92 x (total - 0.43 GiB torch reserve, vllm#10517)) (v1/worker/utils.py::request_memory)
    assert s["gpu_memory_utilization"] == 0.92
    # torch's total on an H100 80GB HBM3: 79.19 GiB = 81,090 MiB (PyTorch OOM lines; hardware/gpus.json)
    assert s["requested_bytes_per_rank"] == -(-(81_090 * MiB) * 92 // 100)
    h = host_chart(d)
    (region,) = [x for x in h.rows[0].segments if x.key.endswith("-shared")]
    assert region.bytes == 64 * GiB  # --kv-offloading-size is GiB in total; from 0.27 one /dev/shm region per node
    d14 = check(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "-tp", "2", "--kv-offloading-size", "64"],
                gpu="h100", host_mem_gib=1024, engine_version="0.14.0").to_dict()
    ranks = [x for x in host_chart(d14).rows[0].segments if x.key.startswith("rank")]
    assert [x.bytes for x in ranks] == [32 * GiB, 32 * GiB]  # 0.14: the total split over the TP workers


def test_many_nodes_and_ranks_are_bounded():
    d = check(["python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "32",
               "--nnodes", "4"], gpu="h200", gpus_per_node=8, nodes=4, host_mem_gib=2000,
              engine_version="0.5.9").to_dict()
    assert len(gpu_chart(d).rows) == 8 and len(host_chart(d).rows) == 4


def test_ledger_bars_add_up_to_the_phases(incident):
    from kvplan.report.html.ledger import ledger_chart

    led = incident["per_node"]["host_ledger"]
    c = ledger_chart(incident)
    assert c is not None and [r.label for r in c.rows] == ["loading", "steady"]
    load, steady = c.rows
    assert load.total == led["loading_bytes"] and steady.total == led["steady_bytes"]
    # the page cache is in the legend, not in a bar; the HiCache pools only in the steady bar (built after graphs)
    assert "weights-page-cache" in {s.key for s in c.legend}
    assert "weights-page-cache" not in {s.key for r in c.rows for s in r.segments}
    assert "hicache" in {s.key for s in steady.segments} and "hicache" not in {s.key for s in load.segments}
    # 8 × 300e9 B of pools against 449 GiB: the capacity mark at the node's memory, the rest in red
    assert c.capacity is not None and c.capacity.at == 449 * GiB
    assert c.over is not None and c.over.end == led["steady_bytes"] > 8 * 300e9
    assert any("pinning 2.40 TB (2,235 GiB): about 40.0 min" in line for line, _bad in c.summary)
    rects = [e["attrs"] for e in layout(c).elements if e["tag"] == "rect" and e["attrs"].get("class") == "seg"]
    assert [a["data-row"] for a in rects if a["data-key"] == "hicache"] == [1]
