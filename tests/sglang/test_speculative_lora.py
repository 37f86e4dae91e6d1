"""SGLang speculative decoding and LoRA: the draft worker's weights and KV pool, and the LoRA memory pool, pinned to
arithmetic done by hand from the 0.5.9 source (engines/sglang/speculative.py, lora.py)."""

from __future__ import annotations

import json

import pytest

from kvplan import check
from kvplan.errors import KvplanError

GiB = 2**30
SGL = ["python", "-m", "sglang.launch_server", "--model-path"]
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]
LORA = ["--enable-lora", "--max-loras-per-batch", "4", "--max-lora-rank", "64", "--lora-paths", "a=org/a", "b=org/b"]


def plan(model: str, *flags: str, version: str = "0.5.9", **opts):
    opts.setdefault("gpu", "h100")
    return check([*SGL, model, *flags], engine_version=version, **opts)


def terms(r) -> dict[str, int]:
    return {t.term: t.bytes for t in r.plan.per_rank.feature_terms}


def ids(r) -> set[str]:
    return {f.id for f in r.findings}


def test_eagle3_head_weights_and_draft_kv_by_hand():
    # EAGLE-3 head of Llama-3.1-8B (H 4096, 32 heads, 8 KV heads, head_dim 128, I 14336, draft vocab 32000), TP1:
    #   qkv_proj 2H × (32 + 16) × 128 = 8192 × 6144   =  50,331,648
    #   o_proj   4096 × 4096                         =  16,777,216
    #   gate_up  4096 × 28672                        = 117,440,512
    #   down     14336 × 4096                        =  58,720,256
    #   fc       3H × H = 12288 × 4096               =  50,331,648
    #   lm_head  32000 × 4096 (32000 is a multiple of 64) = 131,072,000
    #   norms    4 × 4096                            =      16,384
    #   = 424,689,664 params × 2 B = 849,379,328 B, + d2t 32000 × 8 B = 256,000 -> 849,635,328 B
    # draft KV: 1 layer × 8 heads × (128 + 128) × 2 B = 4,096 B/token × (target tokens + 1 page)
    r = plan(LLAMA, *EAGLE3, free_gib=78.0, weights_gib=15.0)
    t = terms(r)
    assert t["draft-weights"] == 849_635_328
    tokens = r.plan.per_rank.kv_tokens
    assert t["draft-kv-pool"] == (tokens + 1) * 4096
    assert "unmodeled-memory" not in ids(r)


def test_eagle3_leaves_the_target_pool_and_takes_the_headroom():
    # the draft worker is built after the target's init_memory_pool: same target tokens, less headroom
    a = plan(LLAMA, "--mem-fraction-static", "0.8", free_gib=78.0, weights_gib=15.0)
    b = plan(LLAMA, "--mem-fraction-static", "0.8", *EAGLE3, free_gib=78.0, weights_gib=15.0)
    assert a.plan.per_rank.kv_tokens == b.plan.per_rank.kv_tokens
    pa, pb = a.plan.per_rank.static, b.plan.per_rank.static
    assert pa is not None and pb is not None
    # max_running_requests 48 (server_args.py::_handle_speculative_decoding): req_to_token 49 rows × (ctx + 4 + 8)
    assert b.plan.per_rank.max_running_requests == 48
    assert pb.req_to_token_bytes == 49 * (131072 + 4 + 8) * 4
    drop = sum(terms(b).values())
    assert pa.headroom_after_pools_bytes - pb.headroom_after_pools_bytes == drop - pa.req_to_token_bytes \
        + pb.req_to_token_bytes


def test_eagle3_local_draft_dir_wins_and_unknown_draft_names_the_config(tmp_path):
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
           "draft_vocab_size": 64000, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = plan(LLAMA, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(tmp_path),
             free_gib=78.0, weights_gib=15.0)
    # a 64000-token head: 32000 × 4096 × 2 B more for lm_head, 32000 × 8 B more for d2t
    assert terms(r)["draft-weights"] == 849_635_328 + 32000 * 4096 * 2 + 32000 * 8
    with pytest.raises(KvplanError, match="config.json"):
        plan(LLAMA, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "nobody/unknown-head")


def test_deepseek_v3_mtp_draft_is_one_moe_layer_per_rank():
    r = plan("deepseek-ai/DeepSeek-V3", "--tp", "8", "--speculative-algorithm", "EAGLE", gpu="h200")
    t = terms(r)
    # one NextN layer: 256 fp8 experts × 3 × 7168 × 2048 B / 8 ranks ≈ 1.31 GiB (+ the fused shared expert, scales,
    # attention), and eh_proj [7168, 14336] bf16 whole on every rank = 205,520,896 B
    assert 1.4 * GiB < t["draft-weights"] < 1.7 * GiB
    # draft KV: MLA 576 × 1 layer × 2 B = 1,152 B/token over the target's tokens
    assert t["draft-kv-pool"] == (r.plan.per_rank.kv_tokens + 1) * 1152
    assert r.plan.per_rank.max_running_requests == 48
    assert "unmodeled-memory" not in ids(r)


def test_speculation_outside_the_releases_read_still_warns():
    # 0.5.3-0.5.6 grow the shared pool by draft/verify tokens instead (not modelled)
    r = plan(LLAMA, *EAGLE3, version="0.5.5")
    assert "unmodeled-memory" in ids(r) and not r.plan.per_rank.feature_terms


def test_from_0_5_14_the_draft_kv_is_sized_inside_the_static_pool():
    # pool_configurator.py: cell + int(cell × d / n) = 131,072 + int(131,072 × 1 / 32) = 135,168 B per token sizes
    # the target's tokens; the draft's own pool (4,096 B/token) then fits in what that leaves
    a = plan(LLAMA, "--mem-fraction-static", "0.8", free_gib=78.0, weights_gib=15.0, version="0.5.23")
    b = plan(LLAMA, "--mem-fraction-static", "0.8", *EAGLE3, free_gib=78.0, weights_gib=15.0, version="0.5.23")
    rest = int(78.0 * GiB) - int(15.0 * GiB) - int(int(78.0 * GiB) * (1 - 0.8))
    assert b.plan.per_rank.kv_tokens == rest // 135_168 < a.plan.per_rank.kv_tokens
    assert terms(b)["draft-kv-pool"] == (b.plan.per_rank.kv_tokens + 1) * 4096
    assert b.plan.per_rank.kv_bytes_per_token == 131_072  # the target's own pool, as its log line counts it
    assert b.plan.per_rank.max_running_requests == 48


def test_lora_buffers_by_hand_and_taken_before_the_kv_pool():
    # Llama-3.1-8B, 4 adapters per batch, rank 64, bf16, TP1, q/k/v/o/gate/up/down (assumed: hub adapters):
    #   qkv_proj   A 4 × 3·64 × 4096 = 3,145,728   B 4 × 6144 × 64  = 1,572,864
    #   o_proj     A 4 × 64 × 4096   = 1,048,576   B 4 × 4096 × 64  = 1,048,576
    #   gate_up    A 4 × 2·64 × 4096 = 2,097,152   B 4 × 28672 × 64 = 7,340,032
    #   down_proj  A 4 × 64 × 14336  = 3,670,016   B 4 × 4096 × 64  = 1,048,576
    #   = 20,971,520 elements per layer × 2 B × 32 layers = 1,342,177,280 B (1.25 GiB)
    a = plan(LLAMA, "--mem-fraction-static", "0.8", free_gib=78.0, weights_gib=15.0)
    b = plan(LLAMA, "--mem-fraction-static", "0.8", *LORA, free_gib=78.0, weights_gib=15.0)
    assert terms(b)["lora-buffers"] == 1_342_177_280
    # the two hub adapters on the CPU of each rank: at most one slot's unsharded share each, 1,342,177,280 / 4
    assert terms(b)["lora-adapters-host"] == 2 * 335_544_320
    assert a.plan.per_rank.kv_tokens - b.plan.per_rank.kv_tokens == pytest.approx(1_342_177_280 / 131072, abs=1)
    assert not {"unmodeled-memory", "unknown-flags"} & ids(b)


def test_lora_tp2_splits_and_adapter_configs_are_read(tmp_path):
    # TP2: o/down split A's input, qkv/gate_up split B's output, the other halves stay whole, per layer:
    #   qkv A 3,145,728 + B 786,432; o A 524,288 + B 1,048,576; gate_up A 2,097,152 + B 3,670,016;
    #   down A 1,835,008 + B 1,048,576 = 14,155,776 × 2 B × 32 layers = 905,969,664 B
    r = plan(LLAMA, "--tp", "2", *LORA, free_gib=78.0, weights_gib=8.0, gpus_per_node=2)
    assert terms(r)["lora-buffers"] == 905_969_664
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 16, "target_modules": ["q_proj", "v_proj"]}))
    r = plan(LLAMA, "--enable-lora", "--max-loras-per-batch", "2", "--lora-paths", f"x={tmp_path}",
             free_gib=78.0, weights_gib=15.0)
    # qkv_proj only (q, v normalize to it), rank 16 from the adapter: A 2 × 48 × 4096 + B 2 × 6144 × 16
    assert terms(r)["lora-buffers"] == 32 * (2 * 48 * 4096 + 2 * 6144 * 16) * 2
    with pytest.raises(KvplanError, match="maximum LoRA rank"):
        plan(LLAMA, "--enable-lora", "--lora-paths", "a=org/a")


def test_speculation_reserves_two_gib_more_in_the_default_fraction():
    # 0.5.9 _handle_gpu_memory_settings on an H100 (81,559 MiB), TP1: 512 + 8192 × 1.5 + 256 × 2 + 1/8 × 1024 =
    # 13,440 MiB (> the 10 GiB floor), + 2,048 for an EAGLE draft = 15,488 -> round((81,559 − 15,488) / 81,559, 3)
    r = plan(LLAMA, *EAGLE3)
    s = r.plan.settings
    assert s.mem_fraction_static == round((81559 - 15488) / 81559, 3) == 0.81
    assert "+2 GiB reserve for the EAGLE3 draft" in s.mem_fraction_static_source


def test_an_eagle_head_kvplan_does_not_size_keeps_the_warning(tmp_path):
    # EAGLE (1/2) head: LlamaForCausalLMEagle, not an EAGLE-3 head: planned without it, with the warning
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle"], "hidden_size": 4096,
                                                      "num_hidden_layers": 1}))
    for draft in (str(tmp_path), "nobody/eagle-head"):
        r = plan(LLAMA, "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", draft)
        assert "unmodeled-memory" in ids(r) and not r.plan.per_rank.feature_terms


def test_standalone_draft_is_a_second_model_sharded_like_the_target():
    # a standalone draft the size of the target: its weights as the target's estimate, its KV cell the same 131,072 B
    r = plan(LLAMA, "--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path",
             "meta-llama/Llama-3.1-8B")
    t = terms(r)
    assert t["draft-weights"] == r.plan.per_rank.weights_bytes
    assert t["draft-kv-pool"] == (r.plan.per_rank.kv_tokens + 1) * 131072
    # STANDALONE reserves 6 GiB: 13,440 + 6,144 = 19,584 MiB -> round((81,559 − 19,584) / 81,559, 3) = 0.76
    assert r.plan.settings.mem_fraction_static == 0.76


def test_lora_in_0_5_23_dense_layers_and_what_stays_unsized():
    # 0.5.23 builds the same buffers for dense layers (get_default_hidden_dim): the same 1,342,177,280 B
    assert terms(plan(LLAMA, *LORA, version="0.5.23"))["lora-buffers"] == 1_342_177_280
    # its "all" also names MLA/Inkling modules, and DP attention shards attention buffers by the attention-TP group
    r = plan(LLAMA, "--enable-lora", "--max-lora-rank", "64", "--lora-target-modules", "all", version="0.5.23")
    assert "unmodeled-memory" in ids(r)
