"""vLLM EPLB (issue 28): redundant experts per EP rank and EPLB's GPU state, pinned to arithmetic done by hand from
vLLM 0.11.0's source (https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/...), never read back from the code."""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.errors import KvplanError

DSV3 = ["vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "8", "--trust-remote-code"]
# one DeepSeek-V3 routed expert per MoE layer in fp8 with 128×128 block scales:
#   gate/up [2048, 7168] + down [7168, 2048] fp8 = 3 × 14,680,064 B; weight_scale_inv [16, 56] / [56, 16] fp32
#   = 3 × 3,584 B -> 44,050,944 B
PER_EXPERT = 3 * 2048 * 7168 + 3 * 16 * 56 * 4


def run(*flags: str):
    return check([*DSV3, *flags], engine_version="0.11.0", gpu="h200", host_mem_gib=2000)


def terms(r) -> dict[str, dict]:
    return {t["term"]: t for t in r.to_dict()["per_rank"].get("feature_terms", [])}


def budget_terms(r) -> dict[str, dict]:
    return {t["name"]: t for t in r.to_dict()["settings"]["kv_budget_terms"]}


def test_redundant_experts_and_eplb_state():
    base = run("--enable-expert-parallel")
    r = run("--enable-expert-parallel", "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 32}')
    t = terms(r)
    # FusedMoE: (256 + 32) / EP 8 = 36 experts per rank instead of 32: 4 × 58 MoE layers × 44,050,944 B
    assert t["eplb-redundant-experts"]["bytes"] == 4 * 58 * PER_EXPERT == 10_219_819_008
    assert r.plan.per_rank.weights_bytes - base.plan.per_rank.weights_bytes == 4 * 58 * PER_EXPERT
    # EplbState.build: int64 [58, 288] + int64 [58, 256, 1024] + int64 [58, 256] + int32 [58, 288]
    # + int32 [1000, 58, 288]
    state = 58 * 288 * 8 + 58 * 256 * 1024 * 8 + 58 * 256 * 8 + 58 * 288 * 4 + 1000 * 58 * 288 * 4
    assert t["eplb-state"]["bytes"] == state == 188_770_048
    assert budget_terms(r)["eplb-state"]["bytes"] == state
    # the profile's dummy rearrangement: one layer's 36 local experts; below the activation peak it adds nothing,
    # at worst all of it
    assert t["eplb-rearrange-buffer"]["bytes"] == 36 * PER_EXPERT
    assert budget_terms(r)["eplb-rearrange-buffer"]["high_bytes"] == 36 * PER_EXPERT
    # the KV budget pays for the redundant experts and the state
    lost = r.to_dict()["settings"]["kv_budget_bytes_per_rank"] - base.to_dict()["settings"]["kv_budget_bytes_per_rank"]
    assert lost == -(4 * 58 * PER_EXPERT + state + budget_terms(r)["eplb-rearrange-buffer"]["bytes"])


def test_window_size_and_deprecated_flag():
    r = run("--enable-expert-parallel", "--enable-eplb", "--num-redundant-experts", "32", "--eplb-window-size", "10")
    assert terms(r)["eplb-state"]["bytes"] == (58 * 288 * 8 + 58 * 256 * 1024 * 8 + 58 * 256 * 8 + 58 * 288 * 4
                                               + 10 * 58 * 288 * 4)


def test_refusals_of_parallel_config():
    with pytest.raises(KvplanError, match="needs --enable-expert-parallel"):
        run("--enable-eplb")
    with pytest.raises(KvplanError, match="EPLB is not enabled"):
        run("--enable-expert-parallel", "--eplb-config", '{"num_redundant_experts": 32}')
    with pytest.raises(KvplanError, match=r"256 routed \+ 30 redundant.*EP 8") as e:
        run("--enable-expert-parallel", "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 30}')
    assert "multiple of 8" in (e.value.hint or "")
