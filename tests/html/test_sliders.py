"""The planning page's sliders through the engine (Engine.slider_flags / slider_view) and the HTML GPU chart's
start-up band (Engine.startup_free_bytes): expected values are the launch commands' own numbers and the sourced
calibration written out by hand, not figures copied from the code."""

from __future__ import annotations

import pytest

from kvplan import KvplanError, check
from kvplan.engines import get_engine
from kvplan.engines.results import SLIDER_NAMES
from kvplan.report.html.gpu import gpu_chart
from kvplan.serve.inputs import SLIDERS
from kvplan.units import GiB, MiB
from tests.conftest import INCIDENT_CMD


def test_the_page_and_the_engines_name_the_same_sliders():
    assert set(SLIDERS) == set(SLIDER_NAMES)


def test_sglang_sliders_show_the_incident_command():
    # --mem-fraction-static 0.93, --tp 8, --hicache-size 300 (GB per rank), no ratio, no DP attention, bf16 KV
    r = check(INCIDENT_CMD, gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition", host_mem_gib=449.0,
              engine_version="0.5.9")
    v = get_engine(r.plan.engine).slider_view(r.plan)
    assert v.values == {"fraction": 0.93, "tp": 8, "dp": 1, "fp8_kv": False, "host_kv": 300, "hicache_ratio": 0,
                        "dp_attention": False}
    assert v.off == () and v.labels["fraction"] == "mem_fraction_static"


def test_vllm_sliders_and_the_two_it_has_no_flag_for():
    r = check(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "-tp", "2", "--kv-offloading-size", "64",
               "--gpu-memory-utilization", "0.85"], gpu="h100", host_mem_gib=1024, engine_version="0.27.0")
    eng = get_engine(r.plan.engine)
    v = eng.slider_view(r.plan)
    assert (v.values["fraction"], v.values["tp"], v.values["host_kv"]) == (0.85, 2, 64)  # 64 GiB for the engine
    assert set(v.off) == {"hicache_ratio", "dp_attention"} and v.labels["fraction"] == "gpu_memory_utilization"
    assert eng.slider_flags({"fraction": 0.9, "max_running": 0}) == {"--gpu-memory-utilization": "0.9",
                                                                      "--max-num-seqs": None}
    with pytest.raises(KvplanError, match="no DP-attention"):
        eng.slider_flags({"dp_attention": True})


def test_an_engine_without_sliders_refuses_them(monkeypatch):
    from kvplan.engines import ENGINES

    monkeypatch.setitem(ENGINES, "toyllm", "tests.fake_engine.engine:ENGINE")
    toy = get_engine("toyllm")
    assert toy.slider_flags({}) == {}
    with pytest.raises(KvplanError):
        toy.slider_flags({"fraction": 0.5})
    assert toy.startup_free_bytes(80 * GiB) is None


def test_vllm_start_up_band_is_total_minus_torch_reserve_and_context():
    # H100 80GB HBM3: nvidia-smi 81,559 MiB; torch's total is 0.43 GiB below it (vllm#10517) and the CUDA context,
    # NCCL and cuBLAS take about 0.6 GiB before vLLM's snapshot: above that the engine refuses to start
    d = check(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], gpu="h100", host_mem_gib=1024,
              engine_version="0.27.0").to_dict()
    c = gpu_chart(d)
    (band,) = [b for b in c.bands if b.key == "fail_high"]
    assert band.start == 81_559 * MiB - int(0.43 * GiB) - int(0.6 * GiB) and band.end == 81_559 * MiB
    assert "vLLM refuses to start" in band.label
