"""SGLang's resolved settings of one launch: what engine.py decided from the flags, the version's defaults and the
host, typed (``Plan.settings``). Field order is the JSON order (schema v1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.result import HostFix, Plan, json_dict


@dataclass(frozen=True)
class HiCacheSettings:
    """The HiCache host pool of one rank and the engine's own check of it (hicache.py)."""

    enabled: bool
    sizing: str  # how the pool was sized, in words ("--hicache-size 300 (decimal GB per rank)")
    ratio: float | None  # host tokens / device tokens, when sized by ratio
    size_gb_per_rank: float | None  # --hicache-size (decimal GB per rank)
    host_check: str  # rules.SGLangRules.host_check: whole-host-per-rank | split-by-ranks | split-by-ranks-cgroup
    engine_budget_bytes_per_rank: int | None  # what this rank's own check compares its request with
    engine_check_passes: bool  # False: the engine refuses to start ("Not enough host memory available")
    pinned_pow2: bool  # the pinned allocator rounds each pool up to a power of two
    host_must_exceed_device: bool  # this version asserts host pool > device pool


@dataclass(frozen=True)
class SGLangSettings:
    mem_fraction_static: float
    mem_fraction_static_source: str
    kv_cache_dtype: str  # label: "bfloat16 (auto: model dtype)"
    page_size: int
    context_len: int
    tp_size: int
    pp_size: int
    dp_size: int
    attn_tp_size: int  # ranks sharing one attention group (tp // dp with DP attention)
    enable_dp_attention: bool
    kv_heads_per_rank: int
    layers_per_rank: int  # on the busiest PP stage
    chunked_prefill_size: int | None
    cuda_graph_max_bs: int | None
    req_to_token_slots: int
    cuda_graph_estimate: str  # the calibration used for the CUDA-graph figure, with its source
    hicache: HiCacheSettings
    host_sizing: str
    host_fix: HostFix | None
    unknown_flags: tuple[str, ...]
    unmodeled: tuple[str, ...]
    model_path: str | None
    world_size: int
    nnodes: int  # --nnodes: SGLang starts world_size // nnodes ranks on each node (scheduler processes per host)
    checkpoint_weights_bytes_per_rank: int | None  # from the checkpoint alone (what a log's figure is compared with)

    def to_dict(self) -> dict[str, Any]:
        return json_dict(self)


def sglang_settings(plan: Plan) -> SGLangSettings:
    """The settings of an SGLang plan (TypeError for another engine's plan: a rule registered on the wrong engine)."""
    s = plan.settings
    if not isinstance(s, SGLangSettings):
        raise TypeError(f"not an SGLang plan: {plan.engine}")
    return s
