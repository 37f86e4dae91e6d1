"""SGLang GPU and host pools, pinned to arithmetic done by hand from the engine's formulas
(../shared/reference/sglang-memory.md sections 1.2-1.6, 2.2-2.3) and config.json facts."""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.errors import KvplanError

GiB = 2**30
SGL = ["python", "-m", "sglang.launch_server", "--model-path"]


def plan(model: str, *flags: str, version: str = "0.5.23", **opts):
    opts.setdefault("gpu", "h100")
    opts.setdefault("host_mem_gib", 2000)
    return check([*SGL, model, *flags], engine_version=version, **opts)


def test_gqa_cell_and_token_formula():
    # Llama-3.1-8B: 8 KV heads × (128+128) × 32 layers × 2 B = 131,072 B/token; tokens = floor(rest / cell)
    r = plan("meta-llama/Llama-3.1-8B-Instruct", "--mem-fraction-static", "0.8", free_gib=78.0, weights_gib=15.0)
    rest = 78.0 * GiB - 15.0 * GiB - int(78.0 * GiB * (1 - 0.8))
    assert r.plan.per_rank.kv_bytes_per_token == 131072
    assert abs(r.plan.per_rank.kv_tokens - rest // 131072) <= 1
    # the pool has one extra page: (tokens + 1) × cell
    assert r.plan.per_rank.kv_pool_bytes == (r.plan.per_rank.kv_tokens + 1) * 131072


def test_heads_below_one_per_rank_are_replicated():
    # Llama-3.1-70B: 8 KV heads at TP16 -> max(1, 8 // 16) = 1 head per rank: 1 × 256 × 80 × 2 = 40,960 B
    r = plan("meta-llama/Llama-3.1-70B", "--tp", "16", "--mem-fraction-static", "0.85", gpus_per_node=8, nodes=2)
    assert r.plan.per_rank.kv_bytes_per_token == 40960


def test_fp8_kv_halves_the_cell():
    a = plan("meta-llama/Llama-3.1-70B", "--tp", "8", "--mem-fraction-static", "0.85")
    b = plan("meta-llama/Llama-3.1-70B", "--tp", "8", "--mem-fraction-static", "0.85", "--kv-cache-dtype", "fp8_e4m3")
    assert a.plan.per_rank.kv_bytes_per_token == 40960 and b.plan.per_rank.kv_bytes_per_token == 20480
    assert abs(b.plan.per_rank.kv_tokens - 2 * a.plan.per_rank.kv_tokens) <= 2


def test_mla_cell_not_divided_by_tp_and_dp_attention_sums_groups():
    # DeepSeek-V3: (512 + 64) × 61 × 2 = 70,272 B/token on every rank, whatever the TP
    tp8 = plan("deepseek-ai/DeepSeek-V3", "--tp", "8", "--mem-fraction-static", "0.85", gpu="h200")
    assert tp8.plan.per_rank.kv_bytes_per_token == 70272
    assert tp8.plan.per_replica.kv_tokens == tp8.plan.per_rank.kv_tokens  # replicated, not summed
    dp = plan("deepseek-ai/DeepSeek-V3", "--tp", "8", "--dp", "8", "--enable-dp-attention",
              "--mem-fraction-static", "0.85", gpu="h200")
    assert dp.plan.per_replica.dp_groups == 8
    assert dp.plan.per_replica.kv_tokens == 8 * dp.plan.per_rank.kv_tokens
    # attention weights are replicated across DP groups, so each rank has less room, but the replica far more
    assert dp.plan.per_rank.weights_bytes > tp8.plan.per_rank.weights_bytes
    assert dp.plan.per_replica.kv_tokens > 4 * tp8.plan.per_replica.kv_tokens


def test_pipeline_stage_layers():
    # Llama-3.1-405B: 126 layers over PP2 -> 63 per stage; 8 KV heads / TP8 = 1: 1 × 256 × 63 × 2 = 32,256 B
    r = plan("meta-llama/Llama-3.1-405B", "--tp", "8", "--pp", "2", "--mem-fraction-static", "0.88",
             gpus_per_node=8, nodes=2, gpu="h200")
    assert r.plan.per_rank.kv_bytes_per_token == 32256


def test_hybrid_swa_gpt_oss():
    # gpt-oss-120b: 36 layers alternating sliding/full; 8 KV heads × 64 dims; TP2 -> 4 heads:
    # F = S = 4 × 128 × 2 = 1024 B per layer; cell = 1024 × 18 + 0.8 × 1024 × 18 = 33,177.6
    r = plan("openai/gpt-oss-120b", "--tp", "2", "--mem-fraction-static", "0.85")
    assert r.plan.per_rank.kv_bytes_per_token == 33177
    assert r.plan.per_rank.swa_tokens == int(0.8 * r.plan.per_rank.kv_tokens)


def test_hybrid_linear_qwen3_next_state_and_cap():
    # Qwen3-Next (GDN): 48 layers, full every 4th -> 12 full layers; 2 KV heads × 256 at TP4 -> 1 head:
    # cell = 1 × 512 × 12 × 2 = 12,288 B. State per layer per rank: conv (2·16·128 + 32·128)/4 × 3 × 2 B = 12,288
    # + ssm 32/4 × 128 × 128 × 4 B = 524,288 -> 536,576 B × 36 linear layers.
    r = plan("Qwen/Qwen3-Next-80B-A3B-Thinking", "--tp", "4", "--mem-fraction-static", "0.85", gpu="h200")
    p = r.plan.per_rank
    assert p.kv_bytes_per_token == 12288
    per_slot = 536576 * 36
    assert p.mamba_slots and p.mamba_slots > 0
    # 0.5.23 default split: state pool ≈ rest × 0.9 / 1.9, minus one padding slot
    rest_total = p.mamba_slots * per_slot + p.kv_tokens * p.kv_bytes_per_token
    assert abs(p.mamba_slots * per_slot / rest_total - 0.9 / 1.9) < 0.01
    assert p.max_running_requests <= p.mamba_slots // 5  # extra_buffer strategy


def test_page_size_and_max_total_tokens():
    r = plan("meta-llama/Llama-3.1-8B-Instruct", "--page-size", "64", "--mem-fraction-static", "0.8")
    assert r.plan.per_rank.kv_tokens % 64 == 0
    r = plan("meta-llama/Llama-3.1-8B-Instruct", "--max-total-tokens", "100000", "--mem-fraction-static", "0.8")
    assert r.plan.per_rank.kv_tokens == 100000


def test_default_fraction_comes_from_the_version_table():
    # 0.5.23 on an H100 at TP1: 0.830 (sglang-memory.md 1.6); 0.4.6.post5 at TP8: 0.81 (tp x pp table)
    assert plan("meta-llama/Llama-3.1-8B-Instruct").plan.settings.mem_fraction_static == 0.830
    r = plan("meta-llama/Llama-3.1-70B", "--tp", "8", version="0.4.6.post5")
    assert r.plan.settings.mem_fraction_static == 0.81


def test_max_running_requests_rules():
    # default (0.5.14+): min(clamp(tokens/ctx×512, 2048, 4096), tokens // 2)
    r = plan("meta-llama/Llama-3.1-8B-Instruct", "--max-total-tokens", "3000", "--mem-fraction-static", "0.8")
    assert r.plan.per_rank.max_running_requests == 1500
    # explicit value, DP attention: divided by dp, capped at tokens // 2
    r = plan("deepseek-ai/DeepSeek-V3", "--tp", "8", "--dp", "4", "--enable-dp-attention",
             "--max-running-requests", "1024", "--mem-fraction-static", "0.85", gpu="h200")
    assert r.plan.per_rank.max_running_requests == 256


def test_hicache_ratio_rounds_up_plus_one_page():
    r = plan("meta-llama/Llama-3.1-8B-Instruct", "--enable-hierarchical-cache", "--hicache-ratio", "2",
             "--page-size", "64", "--mem-fraction-static", "0.8", version="0.5.9")
    t = r.plan.per_rank.kv_tokens
    assert r.plan.per_rank.host_kv_tokens == (2 * t // 64 + 1) * 64
    assert r.plan.per_rank.host_kv_bytes == r.plan.per_rank.host_kv_tokens * 131072


def test_hicache_size_is_decimal_gb_per_rank_and_mla_replicated():
    r = plan("deepseek-ai/DeepSeek-V3", "--tp", "8", "--mem-fraction-static", "0.85", "--enable-hierarchical-cache",
             "--hicache-size", "100", gpu="h200", host_mem_gib=2000, version="0.5.9")
    tokens = int(100e9 // 70272) + 1  # page 1: (tokens // 1 + 1) × 1
    assert r.plan.per_rank.host_kv_tokens == tokens
    assert r.plan.per_node.host_kv_bytes == 8 * tokens * 70272


def test_old_versions_pin_powers_of_two():
    # <=0.5.3: torch pin_memory=True rounds each pool up to 2^k: 40 GB -> 64 GiB (issue #14282 arithmetic)
    r = plan("meta-llama/Llama-3.1-70B", "--tp", "4", "--mem-fraction-static", "0.85", "--enable-hierarchical-cache",
             "--hicache-size", "40", version="0.5.3", host_mem_gib=256)
    assert r.plan.per_rank.host_kv_pinned_bytes == 64 * GiB
    assert r.plan.per_node.host_kv_bytes == 4 * 64 * GiB
    assert "host-oversubscribed" in {f.id for f in r.findings}


def test_split_check_makes_the_engine_refuse_and_is_not_blind():
    # 0.5.20: budget per rank = (available - 10 GiB) // ranks on the host; 8 × 300 GB on 449 GiB -> refuses
    r = plan("moonshotai/Kimi-K2.5", "--tp", "8", "--mem-fraction-static", "0.88", "--enable-hierarchical-cache",
             "--hicache-size", "300", gpu="rtx-pro-6000", host_mem_gib=449, version="0.5.20")
    ids = {f.id for f in r.findings}
    assert "host-oversubscribed" in ids and "host-check-blind" not in ids
    hc = r.plan.settings.hicache
    assert hc.engine_budget_bytes_per_rank == (449 - 10) * GiB // 8
    assert hc.engine_check_passes is False


def test_host_smaller_than_device_is_fatal_only_before_0515():
    args = ("meta-llama/Llama-3.1-8B-Instruct", "--enable-hierarchical-cache", "--hicache-size", "1",
            "--mem-fraction-static", "0.8")
    old = {f.id: f.severity for f in plan(*args, version="0.5.9").findings}
    new = {f.id: f.severity for f in plan(*args, version="0.5.23").findings}
    assert old["hicache-smaller-than-device"] == "error"
    assert new["hicache-smaller-than-device"] == "warning"


def test_kv_pool_empty():
    r = plan("meta-llama/Llama-3.1-70B", "--mem-fraction-static", "0.9")  # 141 GB of weights on one 80 GB GPU
    assert r.plan.per_rank.kv_tokens == 0
    assert "kv-pool-empty" in {f.id for f in r.findings} and r.exit_code == 1


def test_unknown_version_is_refused():
    with pytest.raises(KvplanError, match="outside what kvplan has read"):
        plan("meta-llama/Llama-3.1-8B-Instruct", version="0.2.15")
