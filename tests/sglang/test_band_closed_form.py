"""The KV band of an SGLang plan (``per_rank.kv_tokens_range``) comes from the plan's own pool arithmetic
(``memory.PoolSizing.size``) with P and the weights at their ends; it must equal, to the token, the band of four
whole re-plans with ``--free-gib`` / ``--weights-gib`` pinned at those ends (how it was computed before issue 23),
on dense, MoE, MLA, multimodal, sliding-window and Mamba-hybrid launches, with and without a token cap."""

from __future__ import annotations

import math

import pytest

from kvplan.engines.cmdline import split_command
from kvplan.engines.sglang.args import parse_sglang
from kvplan.engines.sglang.memory import kv_tokens_band, plan_gpu
from kvplan.engines.sglang.rules import rules_for
from kvplan.engines.spreads import residual_fraction
from kvplan.hardware.cluster import resolve_cluster
from kvplan.models.catalog import resolve_model
from kvplan.models.weights_band import MODEL_RESIDUAL_FRACTION
from kvplan.units import GiB

SG = "python -m sglang.launch_server --model-path "
CASES = [
    ("moonshotai/Kimi-K2.5 --tp 8 --mem-fraction-static 0.85", "rtx-pro-6000", "0.5.9"),
    ("moonshotai/Kimi-K2.5 --tp 8 --dp 8 --enable-dp-attention", "h200", "0.5.23"),
    ("deepseek-ai/DeepSeek-V3 --tp 8 --max-total-tokens 20000", "h200", "0.5.23"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4", "h100", "0.5.23"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4 --max-mamba-cache-size 64", "h100", "0.5.9"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct --tp 2 --mamba-full-memory-ratio 0.5", "h200", "0.5.14"),
    ("google/gemma-3-27b-it --tp 2", "h100", "0.5.23"),
    ("openai/gpt-oss-120b --tp 2 --page-size 16", "h100", "0.5.23"),
    ("meta-llama/Llama-3.1-8B --context-length 131072 --mem-fraction-static 0.75", "rtx-4090", "0.5.23"),
    ("meta-llama/Llama-3.1-70B", "h100", "0.5.9"),  # an empty pool
    ("Qwen/Qwen2.5-VL-3B-Instruct", "a100-40gb", "0.5.5"),
    ("Qwen/Qwen3-235B-A22B --tp 8 --pp 2 --quantization fp8", "mi300x", "0.4.8.post1"),
]


def replanned_band(model, args, cluster, rules, version, gpu) -> tuple[int, int]:
    """The band as four whole plans with P and W pinned (the code before the closed form)."""
    if not gpu.estimated_inputs:
        return gpu.kv_tokens, gpu.kv_tokens
    p0, w0 = gpu.baseline_free_bytes, gpu.weights_bytes

    def tokens(p: int, w: int) -> int:
        return plan_gpu(model, args, cluster, rules, version, weights_gib=w / GiB, free_gib=p / GiB).kv_tokens

    down = [gpu.kv_tokens - tokens(gpu.baseline_free_low_bytes, w0), gpu.kv_tokens - tokens(p0, gpu.weights_high_bytes)]
    up = [tokens(gpu.baseline_free_high_bytes, w0) - gpu.kv_tokens, tokens(p0, gpu.weights_low_bytes) - gpu.kv_tokens]
    resid = int(residual_fraction("sglang", MODEL_RESIDUAL_FRACTION) * gpu.kv_tokens)  # engines/spreads.json
    lo = gpu.kv_tokens - int(math.sqrt(sum(max(0, d) ** 2 for d in down + [resid])))
    hi = gpu.kv_tokens + int(math.sqrt(sum(max(0, u) ** 2 for u in up + [resid])))
    return max(0, lo), hi


@pytest.mark.parametrize("launch, gpu_name, version", CASES, ids=[c[0].split()[0] + c[0][-12:] for c in CASES])
def test_band_equals_four_replans(launch, gpu_name, version):
    args = parse_sglang(split_command(SG + launch))
    model = resolve_model(args.model_path)
    cluster = resolve_cluster(gpu_name, None, None, max(1, args.world_size // 8), 1024.0, world_size=args.world_size)
    rules = rules_for(version)
    gpu = plan_gpu(model, args, cluster, rules, version)
    assert gpu.estimated_inputs
    assert kv_tokens_band(gpu) == replanned_band(model, args, cluster, rules, version, gpu)


def test_exact_inputs_collapse_the_band():
    args = parse_sglang(split_command(SG + "Qwen/Qwen3-8B"))
    model = resolve_model(args.model_path)
    cluster = resolve_cluster("h100", None, None, 1, 512.0, world_size=1)
    gpu = plan_gpu(model, args, cluster, rules_for("0.5.23"), "0.5.23", weights_gib=16.0, free_gib=78.0)
    assert kv_tokens_band(gpu) == (gpu.kv_tokens, gpu.kv_tokens) and gpu.kv_tokens > 0
