"""Levers on vLLM (GPU) and on SGLang DP-attention logs: anchoring on the observed pool, the steps, the commands."""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.diagnose.run import diagnose

VLLM_CMD = "vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.85 --max-model-len 8192"
GPU = {"gpu": "h100"}


def _vllm_log(tmp_path, tokens: int = 100_000):
    lines = ["(EngineCore_DP0 pid=1) INFO 11-29 09:00:00 [core.py:93] Initializing a V1 LLM engine (v0.11.0) with "
             "config: model='Qwen/Qwen3-8B', max_seq_len=8192",
             f"(EngineCore_DP0 pid=1) INFO 11-29 09:00:30 [kv_cache_utils.py:1087] GPU KV cache size: {tokens:,} "
             "tokens",
             "(EngineCore_DP0 pid=1) INFO 11-29 09:00:30 [kv_cache_utils.py:1091] Maximum concurrency for 8,192 "
             "tokens per request: 12.21x"]
    for i in range(12):
        lines.append(f"(APIServer pid=2) INFO 11-29 09:10:{i * 5:02d} [loggers.py:123] Engine 000: Avg prompt "
                     "throughput: 900.0 tokens/s, Avg generation throughput: 1500.0 tokens/s, Running: 30 reqs, "
                     f"Waiting: 40 reqs, GPU KV cache usage: {96 + i % 3}.0%, Prefix cache hit rate: 5.0%")
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_vllm_gpu_utilization_steps_are_anchored(tmp_path):
    res = diagnose(log=str(_vllm_log(tmp_path)), launch_command=VLLM_CMD, **GPU)
    assert res.bottleneck == "kv-capacity" and res.engine == "vllm"
    cur = res.lever("current")
    assert cur.kv_tokens == 100_000 and cur.command == VLLM_CMD
    step = res.lever("gpu-util 0.88")
    # the step adds 3 % of the GPU's memory as vLLM sees it (torch's total of an H100: 81,090 MiB) on the observed
    # pool, at 147,456 B per token (Qwen3-8B: 36 layers x 8 KV heads x 128 x K+V x 2 B): 17,299.2 tokens, in whole
    # blocks of 16
    assert abs(step.kv_tokens - 100_000 - 0.03 * 81_090 * 2**20 / 147_456) < 16
    assert "--gpu-memory-utilization 0.88" in step.command
    assert res.lever("fp8 KV").kv_tokens == pytest.approx(200_000, rel=0.01)
    reps = res.lever("2 replicas")  # TP1 on the launch's own GPU: a second launch of it, on one more GPU
    assert reps.command == VLLM_CMD and reps.replicas == 2 and reps.gpus_needed == 2
    avg = res.observed["avg_tokens"]  # usage × pool / running
    assert avg == pytest.approx(0.97 * 100_000 / 30, rel=0.02)
    assert cur.requests == int(100_000 // avg)


def test_vllm_without_command_still_classifies(tmp_path):
    res = diagnose(log=str(_vllm_log(tmp_path)), **GPU)  # the log's config line names the model
    assert res.bottleneck == "kv-capacity"
    assert res.command_source == "rebuilt from the log" and res.lever("current").kv_tokens == 100_000


def test_sglang_dp_attention_log_sums_the_groups(tmp_path):
    cmd = ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention "
           "--mem-fraction-static 0.8")
    lines = [f"[2026-01-01 00:00:00 DP{d} TP{d}] KV Cache is allocated. #tokens: 300000, KV size: 19.64 GB"
             for d in range(8)]
    lines.append("[2026-01-01 00:00:01 DP0 TP0] max_total_num_tokens=300000, chunked_prefill_size=1024, "
                 "max_prefill_tokens=16384, max_running_requests=512, context_len=163840, available_gpu_mem=9.00 GB")
    for s in range(0, 60, 10):
        for d in range(8):
            lines.append(f"[2026-01-01 00:01:{s:02d} DP{d} TP{d}] Decode batch, #running-req: 40, #token: 240000, "
                         "token usage: 0.80, cuda graph: True, gen throughput (token/s): 400.00, #queue-req: 0")
    log = tmp_path / "dp.log"
    log.write_text("\n".join(lines) + "\n")
    res = diagnose(log=str(log), launch_command=cmd, gpu="h200")
    o = res.observed
    assert o["running"] == pytest.approx(320) and o["gen_tps"] == pytest.approx(3200)  # summed over 8 groups
    assert o["pool_tokens"] == 8 * 300_000 and o["max_running"] == 8 * 512
    assert res.bottleneck == "client-bound"
    assert res.lever("current").kv_tokens == 8 * 300_000
    assert res.lever("DP attention") is None  # already on
    assert all(lv.expected_gen_tps == pytest.approx(3200, rel=0.01) for lv in res.levers)  # nothing waits


def test_one_launch_planned_twice_is_the_same_launch_whatever_the_host_had_free():
    """The host memory free on this machine is measured at each plan (it moves between two plans a moment apart):
    the same launch is the same launch, not a "given launch" row of its own (issue 26: a spurious row seen when
    diagnose --url and the fleet priced one real server)."""
    from dataclasses import replace

    from kvplan.diagnose.levers import _same_launch

    plan = check(VLLM_CMD, **GPU, host_mem_gib=100).plan
    node = replace(plan.per_node, host_available_bytes=plan.per_node.host_available_bytes - 4096,
                   host_available_source="this machine's MemAvailable")
    moved = replace(plan, per_node=node)
    assert _same_launch(plan, moved)
    # what other processes held, read a moment apart (MemTotal - MemAvailable: a CI run saw 537.7 vs 541.2 MB)
    others = replace(plan, per_node=replace(node, host_others_bytes=537_726_976))
    assert _same_launch(others, replace(plan, per_node=replace(node, host_others_bytes=541_224_960)))
    other = check(VLLM_CMD.replace("0.85", "0.9"), **GPU, host_mem_gib=100).plan
    assert not _same_launch(plan, other)
