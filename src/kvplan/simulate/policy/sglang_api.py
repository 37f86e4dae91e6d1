"""SGLang for the simulator: its knobs, one scheduler instance, and the levers ``kvplan tune`` tries."""

from __future__ import annotations

from typing import Any

from kvplan.simulate.policy.sglang_knobs import SGLangKnobs, knobs

__all__ = ["knobs", "make_instance", "levers", "SGLangKnobs"]


def make_instance(idx: int, inputs: Any, model: Any, sink: Any, host_bw_bytes_per_s: float) -> Any:
    """One SGLang scheduler (one TP group, or one DP-attention group): radix cache with whole-leaf LRU eviction,
    HiCache host pool of ``host_kv_tokens`` with the launch's write policy."""
    from kvplan.simulate.core.cache import PrefixCache
    from kvplan.simulate.policy.sglang import SGLangInstance

    k: SGLangKnobs = inputs.knobs
    cache = PrefixCache(page=k.page_size, whole_leaf=True, enabled=k.radix_cache,
                        host_tokens=inputs.host_kv_tokens if k.radix_cache else 0,
                        write_policy=k.hicache_write_policy)
    inst = SGLangInstance(idx, inputs.kv_tokens, k.page_size, model, cache, sink,
                          min(inputs.max_running_requests, k.max_running_requests), host_bw_bytes_per_s,
                          inputs.kv_bytes_per_token)
    inst.setup(k)
    return inst


def levers(inputs: Any, hint: dict | None = None) -> list[Any]:
    from kvplan.simulate.policy.sglang_levers import levers as _levers

    return _levers(inputs, hint)
