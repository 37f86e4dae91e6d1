"""SGLang's figures in words: the HiCache host tier as host-oversubscribed quotes it, and the per-rank rows of the
human report (static pool, KV pool, what is left outside it)."""

from __future__ import annotations

from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Plan
from kvplan.units import fmt_count_band, fmt_gib, fmt_host, fmt_term


def host_tiers(plan: Plan) -> list[str]:
    s, r, n = sglang_settings(plan), plan.per_rank, plan.per_node
    if not s.hicache.enabled:
        return []
    pinned = " (pinned, rounded up to a power of two)" if r.host_kv_pinned_bytes != r.host_kv_bytes else ""
    return [f"{n.ranks} ranks × {r.host_kv_pinned_bytes / 1e9:,.2f} GB per rank{pinned} "
            f"({s.host_sizing}, per rank, not a total)"]


def host_refusal(plan: Plan) -> str | None:
    hc = sglang_settings(plan).hicache
    if hc.enabled and not hc.engine_check_passes:
        return "this SGLang version refuses to start ('Not enough host memory available')"
    return None


def rank_rows(plan: Plan) -> list[tuple[str, str, str]]:
    """(what, value, how) per rank: the static pool of P, the KV pool, and what is left outside it."""
    r, s, pool = plan.per_rank, sglang_settings(plan), plan.per_rank.static
    if pool is None:
        raise TypeError("an SGLang plan without a static pool")
    mla = " · MLA replicated per rank" if plan.model.is_mla else ""
    terms = {t.term: t for t in r.feature_terms}
    rows = [("free before weights (P)", fmt_gib(pool.baseline_free_bytes), "engine baseline after dist init"),
            ("weights", fmt_gib(r.weights_bytes), "per rank")]
    if "lora-buffers" in terms:
        rows.append(("LoRA buffers", fmt_gib(terms["lora-buffers"].bytes), terms["lora-buffers"].effect))
    rows += [(f"  {t.term.replace('_', ' ')}", fmt_gib(t.bytes), t.effect) for t in r.feature_terms
             if "host" in t.scope]
    rows += [
             ("mem_fraction_static", f"{pool.mem_fraction_static:g}", s.mem_fraction_static_source),
             ("KV bytes per token", f"{r.kv_bytes_per_token:,} B", f"{s.kv_cache_dtype}, "
              f"{s.kv_heads_per_rank} KV head(s)/rank, {s.layers_per_rank} layers{mla}"),
             ("KV tokens", fmt_count_band(r.kv_tokens, *r.kv_tokens_range),
              f"page size {s.page_size}" + ("" if r.kv_tokens_range[0] == r.kv_tokens_range[1]
                                            else "; (band) baseline and weights at their ends"))]
    if r.swa_tokens is not None:
        rows.append(("SWA tokens", f"{r.swa_tokens:,}", "sliding-window pool"))
    if r.mamba_slots is not None:
        rows.append(("Mamba state slots", f"{r.mamba_slots:,}", "requests with recurrent state"))
    rows += [("KV pool", fmt_gib(r.kv_pool_bytes), "on the GPU, incl. one spare page"),
             ("max running requests", f"{r.max_running_requests:,}", "per DP worker"),
             ("outside the static pool", fmt_gib(pool.headroom_bytes), "P × (1 − fraction)"),
             ("  req_to_token table", fmt_gib(pool.req_to_token_bytes), f"{s.req_to_token_slots} slots × context")]
    rows += [(f"  {t.term.replace('_', ' ')}", fmt_gib(t.bytes), t.effect) for t in r.feature_terms
             if t.term.startswith("draft-")]
    rows += [             ("  CUDA graphs", fmt_gib(pool.cuda_graph_bytes), "estimate"),
             ("  left after graphs", fmt_gib(pool.headroom_after_graphs_bytes), "for prefill activations")]
    placed = {"lora-buffers"} | {t.term for t in r.feature_terms if t.memory == "host" or t.term.startswith("draft-")}
    for t in (t for t in r.feature_terms if t.term not in placed):  # eplb.py, pd.py: what each adds, where counted
        rows.append((f"{t.term}", fmt_term(t.bytes, host=t.memory == "host"),
                     f"{t.memory}, {t.scope}, {t.counted}"))
    if r.host_kv_bytes:
        pinned = f", pins {fmt_host(r.host_kv_pinned_bytes)}" if r.host_kv_pinned_bytes != r.host_kv_bytes else ""
        rows.append(("host KV pool (HiCache)", fmt_host(r.host_kv_bytes),
                     f"{r.host_kv_tokens:,} tokens, {s.hicache.sizing}{pinned}"))
    return rows
