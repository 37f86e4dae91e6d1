"""vLLM's figures in words: each host tier (three meanings of "host KV size") as host-oversubscribed quotes it, and
the per-rank rows of the human report (KV budget, blocks, concurrency)."""

from __future__ import annotations

from kvplan.engines.vllm.settings import vllm_settings
from kvplan.result import Plan
from kvplan.units import GiB, fmt_count_band, fmt_gib, fmt_host, fmt_term


def host_tiers(plan: Plan) -> list[str]:
    parts = []
    for t in vllm_settings(plan).host_tiers:
        ranks = sum(1 for b in t.pinned_per_rank_bytes if b)
        asked = max(t.per_rank_bytes, default=0)
        each = max(t.pinned_per_rank_bytes, default=0)
        pinned = f", pinned up to {each / GiB:,.1f} GiB" if each != asked else ""
        shared = " (one region shared by the node's ranks)" if t.shared_bytes is not None else f" on {ranks} rank(s)"
        parts.append(f"{t.given or f'{t.flag}={asked / GiB:,.1f} GiB ({t.meaning})'}{pinned}{shared} -> "
                     f"{t.node_bytes / GiB:,.1f} GiB on the node")
    return parts


def host_node_labels(plan: Plan) -> tuple[str, str]:
    """The "Per node" rows' names: what the host tiers hold (KV, offloaded weights, swap blocks) and the reserve,
    which is kvplan's own (vLLM and LMCache check nothing)."""
    names = {t.name for t in vllm_settings(plan).host_tiers}
    held = "host weights pinned (--cpu-offload-gb, all ranks)" if names == {"cpu-offload"} else \
        "host KV + offloaded weights (all ranks)" if "cpu-offload" in names else "host KV requested (all ranks)"
    return held, "OS reserve (kept free by kvplan; vLLM checks none)"


def rank_rows(plan: Plan) -> list[tuple[str, str, str]]:
    """(what, value, how) per rank: the KV budget, blocks, what vLLM logs, the scheduler caps, the host tiers."""
    r, s, rep = plan.per_rank, vllm_settings(plan), plan.per_replica
    rows = [("weights", fmt_gib(r.weights_bytes), "per rank"),
            ("KV cache memory", fmt_gib(s.kv_budget_bytes_per_rank), s.kv_budget_source),
            ("block size", f"{s.block_size}", s.block_size_source),
            ("bytes per block", f"{s.bytes_per_block:,} B", f"{s.kv_cache_groups} KV-cache group(s), "
             f"{s.kv_cache_dtype}, {s.kv_heads_per_rank} KV head(s)/rank"
             + (" · MLA replicated per rank" if plan.model.is_mla else "")),
            ("KV blocks", f"{r.kv_blocks or 0:,}",
             "per rank (= per engine: the minimum across ranks), incl. null block"),
            ("KV cache size (tokens)", fmt_count_band(rep.kv_tokens, *r.kv_tokens_range),
             "as vLLM logs it" + ("" if r.kv_tokens_range[0] == r.kv_tokens_range[1]
                                  else "; (band) every estimated budget term at its ends")),
            ("maximum concurrency", f"{rep.max_concurrency or 0:.2f}x",
             f"requests of max_model_len {s.max_model_len:,}"),
            ("max_num_seqs / batched tokens", f"{s.max_num_seqs} / {s.max_num_batched_tokens}", "scheduler")]
    rows[1:1] = [(f"  {t.term.replace('_', ' ')}" + (" (host)" if "host" in t.scope else ""), fmt_gib(t.bytes),
                  t.effect) for t in r.feature_terms]  # speculative drafter and LoRA (features.py)
    placed = {"draft-weights", "draft-buffers", "draft-kv-pool", "lora-buffers", "lora-cpu-cache"}
    for ft in r.feature_terms:  # other launch features (eplb.py): what each adds and where the plan counts it
        if ft.term not in placed:
            rows.append((ft.term, fmt_term(ft.bytes), f"{ft.memory}, {ft.scope}, {ft.counted}"))
    for t in s.host_tiers:
        each = max(t.per_rank_bytes) if t.per_rank_bytes else 0
        rows.append((f"host: {t.flag}", fmt_host(each), f"{t.meaning}; pinned node total {fmt_host(t.node_bytes)}"))
    return rows
