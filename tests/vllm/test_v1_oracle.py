"""vLLM 0.8-0.10 falls back to V0 where ``EngineArgs._is_v1_supported_oracle`` says so (engine/arg_utils.py, read in
the released wheels); the expected values are the conditions as that code writes them, and one real log."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan import check
from kvplan.engines.vllm.profile import engine_kind
from kvplan.engines.vllm.v1_oracle import v0_fallback

CONFIG = Path(__file__).parents[1] / "data/preflight/configs/meta-llama__Llama-3.2-3B/config.json"


def fb(version: str, **kw) -> str | None:
    base = {"platform": "cuda", "cc": 8.0, "kv_cache_dtype": "auto", "dtype": "bfloat16"}
    base.update(kw)
    return v0_fallback(version, **base)


@pytest.mark.parametrize(("version", "cc", "expected"), [
    ("0.8.2", 7.5, "Compute Capability < 8.0"),  # T4
    ("0.10.1", 7.0, "Compute Capability < 8.0"),  # V100: still in 0.10.1's oracle
    ("0.10.2", 7.5, None),  # the check is gone in 0.10.2
    ("0.8.2", 8.9, None),  # L4
    ("0.7.3", 7.5, None),  # before 0.8 V0 is the default anyway: no fallback to speak of
])
def test_compute_capability(version, cc, expected):
    assert fb(version, cc=cc) == expected


@pytest.mark.parametrize(("version", "platform", "cc", "kv", "expected"), [
    ("0.8.0", "cuda", 9.0, "fp8", "--kv-cache-dtype"),  # 0.8.0-0.8.1: "No Fp8 KV cache so far"
    ("0.8.2", "cuda", 9.0, "fp8", None),  # FA3 on Hopper supports fp8
    ("0.8.5", "cuda", 8.0, "fp8", "--kv-cache-dtype"),  # A100: FlashAttention 2, no fp8
    ("0.9.2", "cuda", 10.0, "fp8_e4m3", "--kv-cache-dtype"),  # Blackwell: FA2 in 0.9
    ("0.9.0", "rocm", None, "fp8", None),  # ROCm supported from 0.9.0 (the is_rocm() branch)
    ("0.8.5", "rocm", None, "fp8", "--kv-cache-dtype"),  # ... absent from the 0.8.5 wheel's oracle
    ("0.8.2", "rocm", None, "fp8", "--kv-cache-dtype"),
    ("0.9.2", "cuda", 9.0, "fp8", None),  # H100: FA3, major 9
    ("0.9.2", "cuda", 8.9, "fp8", "--kv-cache-dtype"),  # L4: major 8, FA2
    ("0.9.2", "cuda", 12.0, "fp8", "--kv-cache-dtype"),  # RTX 5090: major 12
    ("0.9.2", "cuda", 9.0, "int8", "--kv-cache-dtype"),  # not fp8: FA3 does not help
    ("0.10.0", "cuda", 8.0, "fp8", None),  # 0.10 asks the platform, which supports fp8 on CUDA
])
def test_kv_cache_dtype(version, platform, cc, kv, expected):
    assert fb(version, platform=platform, cc=cc, kv_cache_dtype=kv) == expected


@pytest.mark.parametrize(("env", "expected"), [
    ({"VLLM_ATTENTION_BACKEND": "FLASHINFER"}, "--kv-cache-dtype"),  # will_use_fa is False
    ({"VLLM_ATTENTION_BACKEND": "FLASH_ATTN_VLLM_V1"}, None),
    ({"VLLM_FLASH_ATTN_VERSION": "2"}, "--kv-cache-dtype"),  # get_flash_attn_version() == 2
    ({"VLLM_FLASH_ATTN_VERSION": "3"}, None),
])
def test_fp8_kv_on_hopper_follows_the_attention_env(env, expected):
    """0.9.2 arg_utils.py: will_use_fa = (is_cuda and VLLM_ATTENTION_BACKEND unset) or == FLASH_ATTN_VLLM_V1."""
    assert fb("0.9.2", cc=9.0, kv_cache_dtype="fp8", env=env) == expected


@pytest.mark.parametrize(("gpu", "kind"), [("h100", "v1"), ("h200", "v1"), ("a100", "v0"), ("l4", "v0"),
                                           ("b200", "v0")])
def test_0_9_2_fp8_kv_plans_v1_on_hopper(gpu, kind):
    """Issue 24: vLLM 0.9.2 keeps V1 for fp8 KV where FA3 runs it (capability 9.x from the GPU catalog: H100 and
    H200 9.0, https://developer.nvidia.com/cuda-gpus); A100 8.0, L4 8.9 and B200 10.0 fall back to V0."""
    plan = check("vllm serve Qwen/Qwen3-8B --kv-cache-dtype fp8", gpu=gpu, engine_version="0.9.2",
                 host_mem_gib=256.0).to_dict()
    assert plan["settings"]["engine_kind"] == kind
    assert any("Falling back to V0" in a for a in plan["assumptions"]) == (kind == "v0")


def test_float32_and_v0_only_flags():
    assert fb("0.8.5", dtype="float32") == "--dtype float32"
    assert fb("0.9.2", dtype="float32") is None
    assert fb("0.9.2", settings={"preemption_mode": "swap"}) == "--preemption-mode"
    assert fb("0.10.1", settings={"num_scheduler_steps": 8}) is None  # removed from the oracle in 0.10.1
    assert fb("0.10.0", settings={"num_scheduler_steps": 8}) == "--num-scheduler-steps"
    assert fb("0.9.2", settings={"num_scheduler_steps": 1}) is None  # the default keeps V1
    assert fb("0.8.5", settings={"scheduling_policy": "priority"}) == "--scheduling-policy"


def test_engine_kind_respects_explicit_v1():
    assert engine_kind("0.8.2", {}, "Compute Capability < 8.0") == "v0"
    assert engine_kind("0.8.2", {"VLLM_USE_V1": "1"}, "Compute Capability < 8.0") == "v1"  # vLLM raises instead
    assert engine_kind("0.11.0", {}, "anything") == "v1"  # V0 is gone


def test_t4_launch_plans_the_v0_engine():
    """The HF cookbook's Colab T4 log (tests/data/preflight, vllm-hfcookbook-llama32-3b-t4-v082) prints 'Compute
    Capability < 8.0 is not supported by the V1 Engine. Falling back to V0.' and V0's '# GPU blocks: 3637'."""
    cmd = ("vllm serve unsloth/Llama-3.2-3B-Instruct --dtype float16 --max-model-len 2048 --enable-prefix-caching "
           "--gpu-memory-utilization 0.8938626454842437 --max-num-batched-tokens 2048 --max-num-seqs 192")
    plan = check(cmd, gpu="Tesla T4", engine_version="0.8.2", host_mem_gib=64.0,
                 model_config=str(CONFIG)).to_dict()
    assert plan["settings"]["engine_kind"] == "v0"
    assert any("Falling back to V0" in a for a in plan["assumptions"])
    lo, hi = plan["per_rank"]["kv_tokens_range"]
    blocks = plan["per_rank"]["kv_blocks"]
    assert lo <= 3637 * 16 <= hi and abs(blocks - 3637) / 3637 < 0.05


@pytest.mark.parametrize(("version", "amx", "flags", "expected"), [
    ("0.32.0", False, [], 16),  # reference CPU MLA kernel: block 16 whatever the user asks
    ("0.32.0", False, ["--block-size", "64"], 16),
    ("0.32.0", True, [], 128),  # AMX MLA: the CPU default
    ("0.32.0", True, ["--block-size", "64"], 64),  # ... and the user's block is kept
    ("0.28.0", True, [], 16),  # 0.28 forces the reference kernel on every CPU
])
def test_cpu_mla_block_follows_the_cpus_amx(monkeypatch, version, amx, flags, expected):
    """platforms/cpu.py::check_and_update_config (0.28: block 16 for MLA; 0.29+: not when amx_mla_enabled)."""
    monkeypatch.setattr("kvplan.hardware.detect.cpu_has_amx", lambda path="/proc/cpuinfo": amx)
    tiny = Path(__file__).parents[1] / "data/tiny/deepseek_v3/config.json"
    cmd = ["VLLM_CPU_KVCACHE_SPACE=1", "vllm", "serve", "/nonexistent/deepseek_v3", "--max-model-len", "512", *flags]
    plan = check(cmd, engine_version=version, host_mem_gib=24, model_config=str(tiny)).to_dict()
    assert plan["settings"]["block_size"] == expected


def test_amx_flag_read_from_cpuinfo(tmp_path):
    from kvplan.hardware.detect import cpu_has_amx

    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile amx_int8\n")
    assert cpu_has_amx(str(f))
    f.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16\n")  # amx_tile is the flag torch checks
    assert not cpu_has_amx(str(f))
    assert not cpu_has_amx(str(tmp_path / "absent"))
