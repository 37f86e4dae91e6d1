"""The vLLM launch levers ``kvplan tune`` tries: GPU memory utilization steps (or twice an explicit KV size), fp8
KV, ``--max-num-seqs`` (around the simulated running batch), ``--max-num-batched-tokens`` (½×, 2×), two replicas
(``--data-parallel-size``)."""

from __future__ import annotations

from typing import Any

from kvplan.simulate.policy.lever import Lever, round_up

GMU_STEP, GMU_MAX, MAX_STEPS = 0.03, 0.98, 5


def levers(inputs: Any, hint: dict | None = None) -> list[Lever]:
    from kvplan.engines.vllm.settings import vllm_settings

    hint = hint or {}
    s = vllm_settings(inputs.plan)
    out: list[Lever] = []
    cmd = inputs.cmd
    if not s.kv_budget_exact and s.platform == "cuda":
        gmu = float(s.gpu_memory_utilization)
        for k in range(1, MAX_STEPS + 1):
            x = round(gmu + GMU_STEP * k, 2)
            if x > GMU_MAX:
                break
            out.append(Lever(f"gpu-util {x:.2f}", {"--gpu-memory-utilization": f"{x:.2f}"}, "fraction"))
    else:
        space = cmd.env.get("VLLM_CPU_KVCACHE_SPACE")
        if space:
            out.append(Lever("KV memory ×2", {"VLLM_CPU_KVCACHE_SPACE": str(int(float(space)) * 2)}, "fraction",
                             "needs twice the KV memory free on the node (not checked)"))
        else:
            from kvplan.engines.vllm.args import parse_vllm

            kvb = parse_vllm(cmd).kv_cache_memory_bytes
            if kvb:
                out.append(Lever("KV memory ×2", {"--kv-cache-memory-bytes": str(kvb * 2)}, "fraction",
                                 "needs twice the KV memory free on the device (not checked)"))
    if "fp8" not in s.kv_cache_dtype:
        out.append(Lever("fp8 KV", {"--kv-cache-dtype": "fp8"}, "fp8",
                         "half the bytes per token; fp8 KV can change outputs: check quality first"))
    seqs = int(s.max_num_seqs or inputs.max_running_requests)
    running = hint.get("running_mean")
    if running:
        for f in (0.75, 1.5):
            n = round_up(running * f, 4)
            if n != seqs:
                out.append(Lever(f"max-num-seqs {n}", {"--max-num-seqs": str(n)}, "max-running"))
    mnbt = int(s.max_num_batched_tokens or 0)
    for c in (mnbt // 2, mnbt * 2):
        if c >= max(256, seqs):
            out.append(Lever(f"max-num-batched-tokens {c}", {"--max-num-batched-tokens": str(c)}, "chunk"))
    dp = s.data_parallel_size or 1
    out.append(Lever("2 replicas", {"--data-parallel-size": str(dp * 2)}, "replicas",
                     f"a second engine on {s.world_size} more device(s)", combinable=False))
    return out
