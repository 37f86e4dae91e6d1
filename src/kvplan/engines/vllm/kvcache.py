"""From KV bytes to blocks, tokens and concurrency, as vLLM V1 computes them.

0.32/0.33 ``vllm/v1/core/kv_cache_utils.py``: ``get_kv_cache_groups`` (uniform spec, uniform type, or
``_get_kv_cache_groups_uniform_page_size`` for hybrids), ``_get_kv_cache_bytes_per_block``,
``get_kv_cache_config_from_groups`` (``num_blocks = available // bytes_per_block``, then the minimum across
workers), ``get_max_concurrency_for_kv_cache_config`` and ``get_kv_cache_capacity``; per-layer pages in
``vllm/v1/kv_cache_interface.py`` (``AttentionSpec.page_size_bytes``, ``MLAAttentionSpec``,
``SlidingWindowSpec.max_admission_blocks_per_request``, ``MambaSpec`` for hybrid linear-attention layers:
``engines/vllm/hybrid.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import UnsupportedModel


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class LayerSpec:
    kind: str  # "full" | "swa" | "mla" | "mamba"
    page_bytes: int  # one block of this layer on one rank
    sliding_window: int | None = None
    state_blocks: int = 1  # "mamba": blocks a request holds (MambaSpec.max_memory_usage_bytes / page)
    block_tokens: int | None = None  # "mamba": MambaSpec.block_size (max_model_len, or the block in align mode)

    def blocks_per_request(self, block_size: int, max_model_len: int, in_flight_tokens: int) -> int:
        if self.kind == "mamba":
            return self.state_blocks
        if self.kind == "swa" and self.sliding_window:
            # SlidingWindowSpec.max_admission_blocks_per_request: +1 because the window may straddle blocks
            n = min(self.sliding_window - 1 + in_flight_tokens, max_model_len)
            return cdiv(n, block_size) + 1
        return cdiv(max_model_len, block_size)  # FullAttentionSpec / MLAAttentionSpec


@dataclass(frozen=True)
class KVLayout:
    groups: tuple[tuple[LayerSpec, ...], ...]  # each group's layers (padding layers included)
    bytes_per_block: int  # largest group's bytes per block (what one block costs on a rank)

    @property
    def num_groups(self) -> int:
        return len(self.groups)


def group_layers(specs: list[LayerSpec], disable_hybrid: bool = False) -> KVLayout:
    """KV-cache groups of one rank's layers (get_kv_cache_groups)."""
    if not specs:
        raise UnsupportedModel("attention-free model: no KV cache to plan")
    if disable_hybrid and any(s.kind == "mamba" for s in specs):
        raise UnsupportedModel("--disable-hybrid-kv-cache-manager cannot unify Mamba/GDN state with attention")
    if disable_hybrid:  # unify_hybrid_kv_cache_specs: sliding-window layers become full attention
        specs = [LayerSpec("full", s.page_bytes) if s.kind == "swa" else s for s in specs]
    if specs.count(specs[0]) == len(specs):  # every layer alike: one group with every layer (as below)
        return KVLayout((tuple(specs),), specs[0].page_bytes * len(specs))
    pages = {s.page_bytes for s in specs}
    if len(pages) > 1:
        raise UnsupportedModel("layers with different page sizes (packed KV groups) are not modeled by kvplan")
    page = pages.pop()
    buckets: dict[tuple, list[LayerSpec]] = {}
    for s in specs:
        buckets.setdefault((s.kind, s.sliding_window), []).append(s)
    if len(buckets) == 1:  # uniform spec or uniform type: one group with every layer
        return KVLayout((tuple(specs),), page * len(specs))
    # _get_kv_cache_groups_uniform_page_size: groups of equal layer count (the smallest bucket, or the
    # largest when max < 1.5 × min), padding the last group of a bucket
    sizes = [len(b) for b in buckets.values()]
    group_size = max(sizes) if max(sizes) < min(sizes) * 1.5 else min(sizes)
    groups = []
    for layers in buckets.values():
        n = cdiv(len(layers), group_size)
        for i in range(n):
            groups.append(tuple(layers[i::n]))
    # every group is padded to group_size layers, so a block costs group_size pages
    return KVLayout(tuple(groups), page * group_size)


@dataclass(frozen=True)
class Capacity:
    num_blocks: int  # per rank = per engine (minimum across ranks), block 0 included
    blocks_per_request: int  # at max_model_len, summed over groups
    max_concurrency: float
    kv_tokens: int  # "GPU KV cache size" as this version logs it


def capacity(layout: KVLayout, available_bytes: int, block_size: int, max_model_len: int, in_flight_tokens: int,
             formula: str = "concurrency", num_blocks_override: int | None = None) -> Capacity:
    """Blocks from bytes, then vLLM's concurrency and token figures."""
    num_blocks = max(0, available_bytes) // layout.bytes_per_block
    if num_blocks_override is not None:
        num_blocks = num_blocks_override
    per_req = sum(g[0].blocks_per_request(block_size, max_model_len, in_flight_tokens) for g in layout.groups)
    conc = num_blocks / per_req if per_req else 0.0
    if formula == "concurrency":  # >= 0.21: get_kv_cache_capacity
        tokens = int(conc * max_model_len)
    elif formula == "blocks-per-group":  # 0.9.1 - 0.20.0: (num_blocks // num_groups) × min block size of the groups
        state = [g[0].block_tokens for g in layout.groups if g[0].block_tokens]  # MambaSpec.block_size
        tokens = (num_blocks // layout.num_groups) * min([block_size, *state])
    else:  # "blocks": num_blocks × block_size
        tokens = num_blocks * block_size
    return Capacity(num_blocks=num_blocks, blocks_per_request=per_req, max_concurrency=conc, kv_tokens=tokens)
