"""The GPU catalog (names and MiB as nvidia-smi / amd-smi print them, datasheet peaks) and `kvplan models/gpus`.

Expected MiB are the figures seen in real nvidia-smi / rocm-smi captures (quoted per case); KV bytes per token
are the MHA / MLA formulas written out by hand.
"""

from __future__ import annotations

import json

import pytest

from kvplan.cli.main import main
from kvplan.errors import KvplanError
from kvplan.hardware.gpus import all_gpus, gpu_perf, lookup_gpu


@pytest.mark.parametrize("name, mib", [
    ("NVIDIA B300 SXM6 AC", 275040),  # '0MiB / 275040MiB'
    ("b300", 275040), ("gb300", 284208), ("NVIDIA GH200 480GB", 97871), ("h800", 81559), ("h800-pcie", 81559),
    ("NVIDIA A800-SXM4-80GB", 81920), ("a800-pcie", 81920), ("l20", 46068), ("a30", 24576), ("a40", 46068),
    ("rtx-5080", 16303), ("rtx-4080", 16376), ("rtx-4070-ti", 12282), ("rtx-4070", 12282), ("rtx-3080", 10240),
    ("rtx-3080-ti", 12288), ("v100-16gb", 16384), ("v100-pcie-32gb", 32768),
    # rocm-smi 'VRAM Total Memory (B)': 309220868096 / 2^20, 68702699520 / 2^20
    ("mi355x", 294896), ("AMD Instinct MI350X", 294896), ("mi250x", 65520), ("mi210", 65520),
])
def test_new_gpu_totals(name, mib):
    assert lookup_gpu(name).total_mib == mib


def test_every_entry_has_platform_and_a_source():
    gpus = all_gpus()
    assert len(gpus) >= 60
    for g in gpus:
        assert g.platform == ("rocm" if g.vendor == "amd" else "cuda"), g.name
        assert g.source, g.name
        assert g.perf is not None, g.name


def test_gpu_perf_dense_figures():
    # H100 SXM datasheet: BF16 1,979 / FP8 3,958 TFLOPS with sparsity -> dense halves; 3.35 TB/s
    p = gpu_perf("NVIDIA H100 80GB HBM3")
    assert (p.mem_bw_gbps, p.bf16_dense_tflops, p.fp8_dense_tflops) == (3350, 989.5, 1979)
    assert p.source and p.source.startswith("https://")
    # HGX B300: 36 PF BF16 / 72 PF FP8 with sparsity over 8 GPUs -> 2.25 / 4.5 PF dense per GPU
    p = gpu_perf("b300")
    assert (p.bf16_dense_tflops, p.fp8_dense_tflops) == (2250, 4500)
    # no bf16 on Turing/Volta, no fp8 before Ada/Hopper
    assert gpu_perf("t4").bf16_dense_tflops is None and gpu_perf("a100").fp8_dense_tflops is None
    with pytest.raises(KvplanError):
        gpu_perf("NVIDIA Imaginary 9000")


def test_unknown_total_is_refused_with_a_hint():
    with pytest.raises(KvplanError, match="unknown GPU") as e:
        lookup_gpu("mi300a")
    assert "--gpu-mem-mib" in e.value.hint


def test_kvplan_models_json(capsys):
    assert main(["models", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["models"]}
    # Llama-3.1-8B: 8 KV heads × (128 + 128) × 32 layers × 2 B = 131,072
    r = rows["meta-llama/Llama-3.1-8B"]
    assert (r["kv_bytes_per_token_bf16"], r["layers"], r["context_len"], r["attention"]) == (131072, 32, 131072, "GQA")
    # DeepSeek-V3 MLA: (512 + 64) × 61 × 2 B = 70,272
    assert rows["deepseek-ai/DeepSeek-V3"]["kv_bytes_per_token_bf16"] == 70272
    # Qwen3-Next: only its 12 full-attention layers hold KV: 2 KV heads × 512 × 12 × 2 B = 24,576
    assert rows["Qwen/Qwen3-Next-80B-A3B-Instruct"]["kv_bytes_per_token_bf16"] == 24576
    assert rows["meta-llama/Llama-3.1-70B"]["checkpoint_gb"] > 100


def test_kvplan_models_and_gpus_tables(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # wide: every column, names on one line
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "DeepseekV3ForCausalLM" in out and "70,272" in out
    assert main(["gpus", "--json"]) == 0
    g = {x["name"]: x for x in json.loads(capsys.readouterr().out)["gpus"]}
    assert g["AMD Instinct MI355X"]["platform"] == "rocm" and g["AMD Instinct MI355X"]["mem_bw_gbps"] == 8000
    assert main(["gpus"]) == 0
    assert "NVIDIA B300 SXM6 AC" in capsys.readouterr().out


@pytest.mark.parametrize("cmd", ["gpus", "models"])
@pytest.mark.parametrize("width", [60, 80, 200])
def test_catalogs_fit_the_width_in_bytes(cmd, width, capsys, monkeypatch):
    # `COLUMNS=80 kvplan gpus | awk '{print length}'`: Debian's awk (mawk) counts bytes, so a box-drawing character
    # (3 bytes) or a middle dot (2) would break the width even when the characters fit
    monkeypatch.setenv("COLUMNS", str(width))
    assert main([cmd]) == 0
    out = capsys.readouterr().out
    assert max(len(line.encode()) for line in out.splitlines()) <= width
    assert "70,272" in out or "97,887" in out  # the figures are there at every width


# issue 24: the compute capability NVIDIA's CUDA GPUs page lists (https://developer.nvidia.com/cuda-gpus)
@pytest.mark.parametrize("name, cc", [
    ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA L4", "8.9"), ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA B200", "10.0"),
    ("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"), ("Tesla T4", "7.5"),
    ("Tesla V100-SXM2-32GB", "7.0"), ("NVIDIA A10G", "8.6"), ("NVIDIA H20", "9.0"), ("NVIDIA L40S", "8.9"),
])
def test_gpus_json_carries_the_compute_capability(name, cc, capsys):
    assert main(["gpus", "--json"]) == 0
    g = {x["name"]: x for x in json.loads(capsys.readouterr().out)["gpus"]}
    assert g[name]["compute_capability"] == cc
    assert g[name]["compute_capability_source"] == "https://developer.nvidia.com/cuda-gpus"


def test_every_nvidia_gpu_has_a_compute_capability_and_amd_none():
    for g in all_gpus():
        if g.vendor == "nvidia":
            assert g.compute_capability and float(g.compute_capability) >= 7.0 and g.architecture, g.name
            assert g.compute_capability_source, g.name
        else:
            assert g.compute_capability is None and (g.architecture or "").startswith("gfx"), g.name
