"""vLLM V1 for the simulator: its knobs, one engine's scheduler, and the levers ``kvplan tune`` tries."""

from __future__ import annotations

from typing import Any

from kvplan.simulate.policy.vllm_knobs import VLLMKnobs, knobs

__all__ = ["knobs", "make_instance", "levers", "VLLMKnobs"]


def make_instance(idx: int, inputs: Any, model: Any, sink: Any, host_bw_bytes_per_s: float) -> Any:
    """One vLLM engine core: block pool of ``kv_tokens`` (whole blocks) less the null block, which the engine takes out
    of the free queue at start and never allocates (``BlockPool.__init__``: ``self.null_block =
    self.free_block_queue.popleft()``; ``get_usage`` divides by ``num_gpu_blocks - 1``:
    https://github.com/vllm-project/vllm/blob/v0.20.0/vllm/v1/core/block_pool.py); prefix cache evicting the last
    blocks of the oldest freed request first; no host tier is simulated for vLLM (offloading connectors are not
    modelled)."""
    from kvplan.simulate.core.cache import PrefixCache
    from kvplan.simulate.policy.vllm import VLLMInstance

    k: VLLMKnobs = inputs.knobs
    cache = PrefixCache(page=k.block_size, whole_leaf=False, enabled=k.prefix_caching, host_tokens=0)
    usable = max(0, inputs.kv_tokens // k.block_size - 1) * k.block_size  # the null block is never allocated
    inst = VLLMInstance(idx, usable, k.block_size, model, cache, sink,
                        min(inputs.max_running_requests, k.max_num_seqs), 0.0, inputs.kv_bytes_per_token)
    inst.setup(k)
    return inst


def levers(inputs: Any, hint: dict | None = None) -> list[Any]:
    from kvplan.simulate.policy.vllm_levers import levers as _levers

    return _levers(inputs, hint)
