"""Issue 28 (PD disaggregation, EPLB, HiCache L3 mooncake): each launch is planned with its feature's own named terms,
pinned to arithmetic done by hand from SGLang 0.5.9's source
(https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/...), never read back from the code."""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.errors import KvplanError

GiB, MiB = 2**30, 2**20
SGL = ["python", "-m", "sglang.launch_server", "--model-path"]
DSV3 = "deepseek-ai/DeepSeek-V3"


def plan(model: str, *flags: str, env: tuple[str, ...] = (), **opts):
    opts.setdefault("gpu", "h200")
    opts.setdefault("host_mem_gib", 2000)
    return check([*env, *SGL, model, *flags], engine_version="0.5.9", **opts)


def terms(r) -> dict[str, dict]:
    return {t["term"]: t for t in r.to_dict()["per_rank"].get("feature_terms", [])}


def ledger(r) -> dict[str, dict]:
    return {row["term"]: row for row in r.to_dict()["per_node"]["host_ledger"]["rows"]}


def ids(r) -> set[str]:
    return {f.id for f in r.findings}


# ---- EPLB ---------------------------------------------------------------------------------------------------
# DeepSeek-V3, fp8 with 128×128 block scales: one routed expert per MoE layer holds
#   gate_proj, up_proj [2048, 7168] and down_proj [7168, 2048] in fp8: 3 × 2048 × 7168 B      = 44,040,192 B
#   their weight_scale_inv [16, 56] / [56, 16] fp32:               3 × 16 × 56 × 4 B          =     10,752 B
#   per expert                                                                                 = 44,050,944 B
# --ep-num-redundant-experts 32 at EP8 (moe_tp 1): (256 + 32) / 8 = 36 experts per rank instead of 32, so
#   4 more experts × 58 MoE layers (61 layers, first_k_dense_replace 3) × 44,050,944 B = 10,219,819,008 B per rank.
PER_EXPERT = 3 * 2048 * 7168 + 3 * 16 * 56 * 4
REDUNDANT_PER_RANK = 4 * 58 * PER_EXPERT
# The recorder (--enable-eplb -> mode "stat", buffer = --eplb-rebalance-num-iterations 1000): a circular buffer
# (1000, 61 layers, 288 physical experts) int32 + the gatherer's (61, 288) int32, on the GPU.
RECORDER = 1000 * 61 * 288 * 4 + 61 * 288 * 4


def test_eplb_redundant_experts_add_expert_weight_per_rank():
    base = plan(DSV3, "--tp", "8", "--ep", "8", "--trust-remote-code")
    eplb = plan(DSV3, "--tp", "8", "--ep-size", "8", "--trust-remote-code", "--enable-eplb",
                "--ep-num-redundant-experts", "32")
    assert "unknown-flags" not in ids(eplb) and "unmodeled-memory" not in ids(eplb)
    t = terms(eplb)
    assert t["eplb-redundant-experts"]["bytes"] == REDUNDANT_PER_RANK == 10_219_819_008
    assert t["eplb-redundant-experts"]["counted"] == "in weights_bytes"
    grown = eplb.plan.per_rank.weights_bytes - base.plan.per_rank.weights_bytes
    # the weights grow by the redundant experts (+ the allocator's segment tails of the bigger stacked tensors)
    assert REDUNDANT_PER_RANK <= grown < REDUNDANT_PER_RANK + 64 * MiB
    assert t["eplb-expert-recorder"]["bytes"] == RECORDER == 70_342_272
    # both come out of the KV pool: 10.2 GB + 70 MB less room at 70,272 B per token
    lost = (base.plan.per_rank.kv_tokens - eplb.plan.per_rank.kv_tokens) * 70272
    assert abs(lost - (grown + RECORDER)) < 70272 * 2


def test_eplb_recorder_follows_its_buffer_size_and_is_off_without_eplb():
    r = plan(DSV3, "--tp", "8", "--ep", "8", "--trust-remote-code", "--ep-num-redundant-experts", "32")
    assert "eplb-expert-recorder" not in terms(r) and "eplb-redundant-experts" in terms(r)
    small = plan(DSV3, "--tp", "8", "--ep", "8", "--trust-remote-code", "--enable-eplb",
                 "--expert-distribution-recorder-buffer-size", "10")
    assert terms(small)["eplb-expert-recorder"]["bytes"] == 10 * 61 * 256 * 4 + 61 * 256 * 4  # no redundancy: 256


def test_eplb_redundant_experts_must_split_over_ep():
    with pytest.raises(KvplanError, match=r"256 routed \+ 30 redundant.*--ep-size 8") as e:
        plan(DSV3, "--tp", "8", "--ep", "8", "--trust-remote-code", "--ep-num-redundant-experts", "30")
    assert e.value.hint and "multiple of 8" in e.value.hint


# ---- PD disaggregation --------------------------------------------------------------------------------------
def test_pd_prefill_has_no_cuda_graphs_and_host_metadata_buffers():
    base = plan(DSV3, "--tp", "8", "--trust-remote-code")
    r = plan(DSV3, "--tp", "8", "--trust-remote-code", "--disaggregation-mode", "prefill")
    assert "unmodeled-memory" not in ids(r) and "kv-pool-empty" not in ids(r)
    t = terms(r)
    # _handle_pd_disaggregation: disable_cuda_graph = True on prefill (no piecewise graphs asked)
    assert "pd-prefill-cuda-graphs-off" in t and r.plan.per_rank.budget.cuda_graph_bytes == 0
    assert base.plan.per_rank.budget.cuda_graph_bytes > 0
    # the default mem_fraction_static is computed before that adjustment: the same KV pool
    assert r.plan.per_rank.kv_tokens == base.plan.per_rank.kv_tokens
    # MetadataBuffers(2 × max_running_requests) on the CPU, per slot: int32[16] × 3 + fp32[16] (ids, cached,
    # logprob idx / val) 256 B + fp32/int32 [128] top logprobs 1,024 B + fp32[16] top-k p 64 B + int64[16] top-k
    # index 128 B + fp32[16] hidden states (no EAGLE) 64 B + uint64[8] bootstrap room 64 B = 1,600 B
    mrr = r.plan.per_rank.max_running_requests
    assert t["pd-metadata-buffers"]["bytes"] == 2 * mrr * 1600 and t["pd-metadata-buffers"]["memory"] == "host"
    row = ledger(r)["pd-metadata-buffers"]
    assert row["count"] == 8 and row["bytes_each"] == 2 * mrr * 1600
    assert t["pd-transfer-registration"]["bytes"] == 0  # the KV pool is registered where it is


def test_pd_prefill_keeps_graphs_with_piecewise():
    r = plan(DSV3, "--tp", "8", "--trust-remote-code", "--disaggregation-mode", "prefill",
             "--enable-piecewise-cuda-graph")
    assert "pd-prefill-cuda-graphs-off" not in terms(r) and r.plan.per_rank.budget.cuda_graph_bytes > 0


def test_pd_decode_preallocates_request_rows_when_few():
    # --max-running-requests 16 (≤ 32): DecodeReqToTokenPool holds 16 + 2 × 16 = 48 rows of (163,840 + 4) int32
    # beside kvplan's req_to_token table; MetadataBuffers: 2 × 16 slots × 1,600 B
    cols = 163840 + 4
    base = plan(DSV3, "--tp", "8", "--trust-remote-code", "--max-running-requests", "16")
    r = plan(DSV3, "--tp", "8", "--trust-remote-code", "--max-running-requests", "16", "--disaggregation-mode",
             "decode")
    assert "unmodeled-memory" not in ids(r)
    t = terms(r)
    assert t["pd-decode-prealloc-slots"]["bytes"] == 32 * cols * 4 == 20_972_032
    assert r.plan.per_rank.budget.req_to_token_bytes - base.plan.per_rank.budget.req_to_token_bytes == 32 * cols * 4
    assert t["pd-metadata-buffers"]["bytes"] == 32 * 1600
    assert r.plan.per_rank.budget.cuda_graph_bytes == base.plan.per_rank.budget.cuda_graph_bytes  # decode keeps them


def test_pd_decode_default_has_no_prealloc_rows():
    # default max_num_reqs ≥ 2048 > 32: pre_alloc_size 0
    r = plan(DSV3, "--tp", "8", "--trust-remote-code", "--disaggregation-mode", "decode")
    assert terms(r)["pd-decode-prealloc-slots"]["bytes"] == 0
    assert "unmodeled-memory" not in ids(r) and "kv-pool-empty" not in ids(r)


def test_pd_decode_offload_is_a_host_kv_pool():
    # DecodeKVCacheOffloadManager: MLATokenToKVPoolHost(kv_cache, hicache_ratio, ...): ratio 1 -> (device tokens
    # // page + 1) × page tokens (0.5.6+ rounding, page 1) × 70,272 B per token on each rank
    r = plan(DSV3, "--tp", "8", "--trust-remote-code", "--disaggregation-mode", "decode",
             "--disaggregation-decode-enable-offload-kvcache", "--hicache-ratio", "1")
    assert "unmodeled-memory" not in ids(r)
    row = ledger(r)["hicache"]
    assert row["bytes_each"] == (r.plan.per_rank.kv_tokens + 1) * 70272 and row["count"] == 8
    assert "decode-side offload" in row["what"]


def test_pd_refusals_of_the_engine():
    # _handle_cache_compatibility: the decode server's forced chunk cache and HiCache are mutually exclusive
    with pytest.raises(KvplanError, match="refuses --enable-hierarchical-cache on a decode server") as e:
        plan(DSV3, "--tp", "8", "--trust-remote-code", "--disaggregation-mode", "decode",
             "--enable-hierarchical-cache")
    assert "--disaggregation-decode-enable-offload-kvcache" in (e.value.hint or "")
    with pytest.raises(KvplanError, match="only supported on a decode server"):
        plan(DSV3, "--tp", "8", "--trust-remote-code", "--disaggregation-mode", "prefill",
             "--disaggregation-decode-enable-offload-kvcache")


# ---- HiCache L3: mooncake -------------------------------------------------------------------------------------
def test_mooncake_backend_is_sized_not_unmodeled():
    r = plan("meta-llama/Llama-3.1-8B-Instruct", "--enable-hierarchical-cache", "--hicache-storage-backend",
             "mooncake", gpu="h100")
    assert "unmodeled-memory" not in ids(r)
    rows = ledger(r)
    # MOONCAKE_GLOBAL_SEGMENT_SIZE default "4gb" = 4 GiB // 1 TP rank; DEFAULT_LOCAL_BUFFER_SIZE 16 MiB
    assert rows["mooncake-segment"]["bytes_each"] == 4 * GiB and rows["mooncake-buffer"]["bytes_each"] == 16 * MiB
    other = plan("meta-llama/Llama-3.1-8B-Instruct", "--enable-hierarchical-cache", "--hicache-storage-backend",
                 "file", gpu="h100")
    assert "unmodeled-memory" in ids(other)  # the file backend's buffers are not sized


def test_mooncake_extra_config_sets_the_segment():
    # load_from_extra_config when the extra config names master_server_address: "32gb" = 32 GiB // 2 TP ranks
    r = plan("meta-llama/Llama-3.1-8B-Instruct", "--tp", "2", "--enable-hierarchical-cache",
             "--hicache-storage-backend", "mooncake", "--hicache-storage-backend-extra-config",
             '{"master_server_address": "10.0.0.1:50051", "global_segment_size": "32gb", "protocol": "rdma"}',
             env=("MOONCAKE_GLOBAL_SEGMENT_SIZE=8gb",), gpu="h100")
    row = ledger(r)["mooncake-segment"]
    assert row["bytes_each"] == 16 * GiB and row["count"] == 2 and row["memory"] == "pinned"


def test_mooncake_segment_splits_over_attention_tp_under_dp_attention():
    # HiCacheController: tp_size = get_attention_tp_size() with DP attention: 8 // 4 = 2 -> "8gb" // 2 = 4 GiB
    r = plan(DSV3, "--tp", "8", "--dp", "4", "--enable-dp-attention", "--trust-remote-code",
             "--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake",
             env=("MOONCAKE_GLOBAL_SEGMENT_SIZE=8gb",))
    assert ledger(r)["mooncake-segment"]["bytes_each"] == 4 * GiB


def test_pd_prefill_graph_rule_only_where_read():
    # 0.5.10 ties the prefill's CUDA graphs to its piecewise-graph auto-disable rules (not read): graphs kept
    r = check([*SGL, DSV3, "--tp", "8", "--trust-remote-code", "--disaggregation-mode", "prefill"],
              engine_version="0.5.23", gpu="h200", host_mem_gib=2000)
    assert "pd-prefill-cuda-graphs-off" not in terms(r) and r.plan.per_rank.budget.cuda_graph_bytes > 0
    assert any("as read from 0.5.9" in a for a in r.plan.assumptions)


def test_pd_transfer_backends_register_in_place():
    nixl = plan(DSV3, "--tp", "8", "--trust-remote-code", "--disaggregation-mode", "decode",
                "--disaggregation-transfer-backend", "nixl")
    assert "NIXL" in terms(nixl)["pd-transfer-registration"]["what"]
    assert terms(nixl)["pd-transfer-registration"]["bytes"] == 0
