"""Flags the engine would reject are errors with the closest valid flag and a fixed command (issue #13 item 1),
run through the CLI as a user would: ``kvplan check --json ... -- <launch command>``."""

from __future__ import annotations

import pytest

from kvplan import check
from tests.conftest import check_json

HW = ["--gpu", "h100", "--host-mem-gib", "256"]
SG = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
VL = ["vllm", "serve", "Qwen/Qwen3-8B"]


def _errors(d: dict) -> list[dict]:
    return [f for f in d["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("version", ["0.4.5.post1", "0.5.9", "0.5.23"])
def test_sglang_misspelt_flags(version):
    code, d = check_json([*HW, "--engine-version", version], [*SG, "--mem-fraction-statc", "0.9", "--tpp", "2"])
    assert code == 1 and d["verdict"] == "fail"
    msgs = [f["message"] for f in _errors(d) if f["id"] == "flag-unknown"]
    assert any("--mem-fraction-statc" in m and "did you mean --mem-fraction-static" in m for m in msgs)
    assert any("--tpp" in m and "did you mean --tp" in m for m in msgs)
    # planned with the defaults (the engine never parses a misspelt flag) ...
    assert d["settings"]["tp_size"] == 1
    # ... and the fixed command carries the right flags with the same values
    assert d["suggested_command"].endswith("--model-path Qwen/Qwen3-8B --mem-fraction-static 0.9 --tp 2")
    code2, d2 = check_json([*HW, "--engine-version", version], d["suggested_command"].split())
    assert not [f for f in _errors(d2) if f["id"].startswith("flag-")] and d2["settings"]["tp_size"] == 2


@pytest.mark.parametrize("version", ["0.6.6.post1", "0.10.2", "0.20.0", "0.33.0"])
def test_vllm_british_spelling(version):
    code, d = check_json([*HW, "--engine-version", version], [*VL, "--gpu-memory-utilisation", "0.9"])
    assert code == 1
    f = next(f for f in _errors(d) if f["id"] == "flag-unknown")
    assert "did you mean --gpu-memory-utilization" in f["message"]
    assert d["suggested_command"] == "vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.9"


def test_vllm_tpp():
    code, d = check_json([*HW, "--engine-version", "0.32.0"], [*VL, "--tpp", "2"])
    assert code == 1
    f = next(f for f in _errors(d) if f["id"] == "flag-unknown")
    assert "did you mean -tp" in f["message"]
    assert d["suggested_command"] == "vllm serve Qwen/Qwen3-8B -tp 2"


@pytest.mark.parametrize("flag, version, gone", [("--use-v2-block-manager", "0.20.0", None),
                                                 ("--max-num-partial-prefills", "0.27.0", "0.27.0"),
                                                 ("--swap-space", "0.18.0", "0.18.0")])
def test_vllm_removed_flags(flag, version, gone):
    extra = [flag] if flag == "--use-v2-block-manager" else [flag, "4"]
    code, d = check_json([*HW, "--engine-version", version], [*VL, *extra])
    assert code == 1
    f = next(f for f in _errors(d) if f["id"] == "flag-removed")
    assert f"has no {flag}: removed in " in f["message"]
    if gone:
        assert f"removed in {gone}" in f["message"]
    assert flag not in d["suggested_command"] and d["suggested_command"].startswith("vllm serve Qwen/Qwen3-8B")


@pytest.mark.parametrize("engine_cmd, version, flag, value", [
    # sglang-0.4.4 server_args.py: "--kv-cache-dtype", ..., choices=["auto", "fp8_e5m2", "fp8_e4m3"]
    (SG, "0.5.9", "--kv-cache-dtype", "fp8"), (SG, "0.4.4", "--kv-cache-dtype", "int8"),
    # vllm-0.6.0 engine/arg_utils.py:253-255 '--kv-cache-dtype', type=str, choices=['auto', 'fp8', 'fp8_e5m2', ...]
    (VL, "0.32.0", "--kv-cache-dtype", "fp9"), (VL, "0.6.0", "--kv-cache-dtype", "fp16")])
def test_out_of_choice_values(engine_cmd, version, flag, value):
    code, d = check_json([*HW, "--engine-version", version], [*engine_cmd, flag, value])
    assert code == 1
    f = next(f for f in _errors(d) if f["id"] == "flag-bad-value")
    assert "invalid choice" in f["message"] and flag in f["message"]


def test_store_true_given_a_value():
    r = check([*SG, "--enable-hierarchical-cache=true"], gpu="h100", host_mem_gib=256, engine_version="0.5.9")
    f = next(f for f in r.findings if f.id == "flag-bad-value")
    assert "takes no value" in f.message and r.suggested_command.endswith("--enable-hierarchical-cache")


def test_valid_launches_raise_nothing():
    for cmd, v in ((SG + ["--tp-size", "2", "--mem-fraction-static", "0.85", "--enable-hierarchical-cache",
                          "--hicache-size", "40"], "0.5.9"),
                   (SG + ["--tp", "2", "--mem-frac", "0.85", "--enable-hicache"], "0.5.23"),
                   (VL + ["-tp", "2", "--max_model_len=8192", "--enable-prefix-caching"], "0.32.0"),
                   (VL + ["--use-v2-block-manager", "--swap-space", "4"], "0.6.0")):
        r = check(cmd, gpu="h100", host_mem_gib=256, engine_version=v)
        assert not [f for f in r.findings if f.id.startswith("flag-")], (v, [f.message for f in r.findings])


def test_unknown_flags_info_only_for_accepted_flags():
    r = check([*SG, "--watchdog-timeout", "600", "--tpp", "2", "--enable-p2p-check"], gpu="h100",
              host_mem_gib=256, engine_version="0.5.9")
    info = next(f for f in r.findings if f.id == "unknown-flags")
    assert "--enable-p2p-check" in info.message and "--tpp" not in info.message
