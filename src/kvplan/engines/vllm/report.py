"""vLLM's figures in words: each host tier (three meanings of "host KV size") as host-oversubscribed quotes it, and
the per-rank rows of the human report (KV budget, blocks, concurrency)."""

from __future__ import annotations

from kvplan.engines.vllm.settings import vllm_settings
from kvplan.result import Plan
from kvplan.units import GiB


def host_tiers(plan: Plan) -> list[str]:
    parts = []
    for t in vllm_settings(plan).host_tiers:
        ranks = sum(1 for b in t.pinned_per_rank_bytes if b)
        asked = max(t.per_rank_bytes, default=0)
        each = max(t.pinned_per_rank_bytes, default=0)
        pinned = f", pinned up to {each / GiB:,.1f} GiB" if each != asked else ""
        shared = " (one region shared by the node's ranks)" if t.shared_bytes is not None else f" on {ranks} rank(s)"
        parts.append(f"{t.flag}={asked / GiB:,.1f} GiB ({t.meaning}){pinned}{shared} -> "
                     f"{t.node_bytes / GiB:,.1f} GiB on the node")
    return parts
