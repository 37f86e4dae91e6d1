"""vLLM's resolved settings of one launch: what engine.py decided from the flags, the environment, the version
table and the host, typed (``Plan.settings``). Field order is the JSON order (schema v1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.engines.vllm.host import HostTier
from kvplan.engines.vllm.terms import BudgetTerm
from kvplan.result import HostFix, Plan, json_dict


@dataclass(frozen=True)
class CapacityRules:
    capacity_formula: str  # rules.VLLMRules.capacity_formula: how this version turns blocks into logged tokens


@dataclass(frozen=True)
class VLLMSettings:
    platform: str  # "cuda" | "cpu"
    gpu_memory_utilization: float
    kv_budget_bytes_per_rank: int  # what one worker gives its KV cache
    kv_budget_source: str
    kv_budget_exact: bool  # the engine takes the number as given (no profiling)
    requested_bytes_per_rank: int | None  # ceil(total × utilization); None when the budget is exact
    non_kv_bytes_per_rank: int | None  # weights + activation peak + non-torch (estimate)
    kv_budget_range_bytes_per_rank: tuple[int, int]  # (every estimated term at its high end, at its low end)
    kv_budget_terms: tuple[BudgetTerm, ...]  # what was subtracted from the request, each with its range
    engine_kind: str  # profile.engine_kind: which engine core profiles (V0 / V1)
    block_size: int
    block_size_source: str
    kv_cache_dtype: str  # label: "bfloat16 (auto: model dtype)"
    model_dtype: str  # dtype.resolve_dtype: what --dtype (auto) resolves to for this version and platform
    model_dtype_source: str
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_cache_groups: int
    bytes_per_block: int  # one block of every layer of the largest group, per rank
    blocks_per_request: int  # at max_model_len, summed over groups
    one_request_bytes: int  # KV of one max_model_len request on the busiest rank
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    context_len: int
    kv_heads_per_rank: int
    layers_per_rank: int
    attn_tp_size: int
    host_tiers: tuple[HostTier, ...]
    host_fix: HostFix | None
    swap_space: str  # rules.VLLMRules.swap_space: allocates | check-only | removed
    flags_given: tuple[str, ...]  # canonical flag names as written (for removed-flag checks)
    unknown_flags: tuple[str, ...]
    unmodeled: tuple[str, ...]
    world_size: int
    model_path: str | None
    engine_rules: CapacityRules
    checkpoint_weights_bytes_per_rank: int | None

    def to_dict(self) -> dict[str, Any]:
        return json_dict(self)


def vllm_settings(plan: Plan) -> VLLMSettings:
    """The settings of a vLLM plan (TypeError for another engine's plan: a rule registered on the wrong engine)."""
    s = plan.settings
    if not isinstance(s, VLLMSettings):
        raise TypeError(f"not a vLLM plan: {plan.engine}")
    return s
