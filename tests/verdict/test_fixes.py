"""Every suggested command passes its own check (issue 13 item 4), and a fix moves its value the way that removes
the error. Hand arithmetic is written out next to each assertion."""

from __future__ import annotations

import re

from kvplan import check
from kvplan.units import GiB

VLLM_70B_OFFLOAD = ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "4", "--cpu-offload-gb", "40",
                    "--max-model-len", "1024"]


def _errors(r):
    return [f.id for f in r.findings if f.severity == "error"]


def test_cpu_offload_fix_shrinks_the_offload_and_passes():
    r = check(VLLM_70B_OFFLOAD, gpu="h100", host_mem_gib=256, engine_version="0.11.0")
    assert "host-oversubscribed" in _errors(r)
    m = re.search(r"--cpu-offload-gb[ =](\d+)", r.suggested_command or "")
    assert m, r.suggested_command
    value = int(m.group(1))
    assert value < 40  # the error is too much pinned host memory: the fix must lower the request
    # 4 ranks × value GiB × 1.9 (vLLM #56410: pinned host RSS up to 1.9× the request) within 256 − 10 GiB
    assert 4 * value * 1.9 <= 256 - 10
    again = check(r.suggested_command, gpu="h100", host_mem_gib=256, engine_version="0.11.0")
    assert _errors(again) == []


def test_cpu_offload_pins_only_the_weights_a_rank_has():
    """maybe_offload_to_cpu stops when the parameters run out: a 70B bf16 model at TP4 has about 70.6e9 × 2 B / 4 =
    32.9 GiB of weights per rank, so 40 GiB asked pins about 32.9 GiB × 1.9 per rank, not 40 × 1.9."""
    r = check(VLLM_70B_OFFLOAD, gpu="h100", host_mem_gib=1024, engine_version="0.11.0")
    tier = next(t for t in r.plan.settings.host_tiers if t.name == "cpu-offload")
    per_rank = tier.per_rank_bytes[0]
    assert 30 * GiB < per_rank < 35 * GiB
    assert abs(tier.pinned_per_rank_bytes[0] - 1.9 * per_rank) <= 1


def test_incident_suggestion_rechecks_clean():
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
           "--mem-fraction-static", "0.93", "--enable-hierarchical-cache", "--hicache-size", "300"]
    hw = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "host_mem_gib": 449, "engine_version": "0.5.9"}
    r = check(cmd, **hw)
    assert r.suggested_command and r.suggested_findings is not None
    assert not [f for f in r.suggested_findings if f.severity == "error"]
    again = check(r.suggested_command, **hw)
    assert _errors(again) == []
    assert r.to_dict()["suggested"]["verdict"] in ("ok", "warn")


def test_host_pool_that_cannot_exceed_the_gpu_pool_drops_hicache():
    """SGLang 0.5.5 asserts host pool > GPU pool. Qwen3-32B (64 layers, 8 KV heads × 128) at TP4: 2 × 2 heads × 128 ×
    64 layers × 2 B = 65,536 B per token per rank; the H100 pool of ~783k tokens is ~51 GB per rank. The node holds
    at most 0.8 × (256 − 10) GiB / 4 = 52.8 GB per rank, and 0.5.5 pins powers of two: 2^35 B × 0.98 -> 33 GB. No
    size both fits the node and exceeds the GPU pool, so the only passing fix drops HiCache."""
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B", "--tp", "4",
           "--enable-hierarchical-cache", "--hicache-ratio", "1.0"]
    r = check(cmd, gpu="h100", host_mem_gib=256, engine_version="0.5.5")
    assert r.verdict == "fail"
    assert r.suggested_command is not None and "--enable-hierarchical-cache" not in r.suggested_command
    assert "--hicache" not in r.suggested_command
    assert _errors(check(r.suggested_command, gpu="h100", host_mem_gib=256, engine_version="0.5.5")) == []


def test_no_passing_fix_is_said_not_shown():
    """Llama-3.1-70B at TP1 needs ~131 GiB of bf16 weights on an 80 GiB H100: any --cpu-offload-gb the 64 GiB host
    holds (≤ 0.8 × 54 / 1.9 = 22 GiB) leaves ~109 GiB of weights on the GPU, so no fixed command starts."""
    cmd = ["vllm", "serve", "meta-llama/Llama-3.1-70B", "--cpu-offload-gb", "100", "--max-model-len", "8192"]
    r = check(cmd, gpu="h100", host_mem_gib=64, engine_version="0.11.0")
    assert r.verdict == "fail"
    assert r.suggested_command is None and r.suggestion_note and "by hand" in r.suggestion_note
    assert r.to_dict()["suggestion_note"] == r.suggestion_note


FAILING = [
    (["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--mem-fraction-statc", "0.9"],
     {"gpu": "h100", "host_mem_gib": 256, "engine_version": "0.5.9"}),
    (["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tpp", "2"],
     {"gpu": "h100", "host_mem_gib": 256, "engine_version": "0.5.23"}),
    (["vllm", "serve", "Qwen/Qwen3-8B", "--gpu-memory-utilisation", "0.9"],
     {"gpu": "h100", "host_mem_gib": 256, "engine_version": "0.11.0"}),
    (["vllm", "serve", "Qwen/Qwen3-8B", "--use-v2-block-manager"],
     {"gpu": "h100", "host_mem_gib": 256, "engine_version": "0.20.0"}),
    (["vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "8", "--kv-offloading-size", "4096"],
     {"gpu": "h200", "host_mem_gib": 1024, "engine_version": "0.27.0"}),
    (["LMCACHE_MAX_LOCAL_CPU_SIZE=300", "vllm", "serve", "meta-llama/Llama-3.1-70B", "-tp", "8",
      "--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'],
     {"gpu": "h100", "host_mem_gib": 1024, "engine_version": "0.11.0"}),
]


def test_held_out_failing_launches_get_a_passing_fix():
    for cmd, hw in FAILING:
        r = check(cmd, **hw)
        assert r.verdict == "fail", cmd
        assert r.suggested_command, (cmd, r.suggestion_note)
        assert _errors(check(r.suggested_command, **hw)) == [], (cmd, r.suggested_command)
