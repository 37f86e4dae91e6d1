"""vLLM V1 for the simulator: its knobs, one engine's scheduler, and the levers ``kvplan tune`` tries."""

from __future__ import annotations

from typing import Any

from kvplan.simulate.policy.vllm_knobs import VLLMKnobs, knobs

__all__ = ["knobs", "make_instance", "levers", "VLLMKnobs"]


def make_instance(idx: int, inputs: Any, model: Any, sink: Any, host_bw_bytes_per_s: float) -> Any:
    """One vLLM engine core: block pool of ``kv_tokens`` (whole blocks), prefix cache evicting the last blocks of the
    oldest freed request first; no host tier is simulated for vLLM (offloading connectors are not modelled)."""
    from kvplan.simulate.core.cache import PrefixCache
    from kvplan.simulate.policy.vllm import VLLMInstance

    k: VLLMKnobs = inputs.knobs
    cache = PrefixCache(page=k.block_size, whole_leaf=False, enabled=k.prefix_caching, host_tokens=0)
    inst = VLLMInstance(idx, inputs.kv_tokens, k.block_size, model, cache, sink,
                        min(inputs.max_running_requests, k.max_num_seqs), 0.0, inputs.kv_bytes_per_token)
    inst.setup(k)
    return inst


def levers(inputs: Any, hint: dict | None = None) -> list[Any]:
    from kvplan.simulate.policy.vllm_levers import levers as _levers

    return _levers(inputs, hint)
