"""SGLang's figures for ``kvplan explain``: what the log printed vs what the plan computes, with the tolerance the
log's own rounding leaves (its "GB" figures are GiB with two decimals) and a likely cause when they part."""

from __future__ import annotations

from kvplan.engines.results import Comparison
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.logs.facts import LogFacts
from kvplan.result import Plan
from kvplan.units import GiB

HALF_CENT = 0.005  # a figure printed as X.XX GiB is known to ± 0.005 GiB


def _rel(abs_gib: float, of_gib: float) -> float:
    return abs_gib / of_gib if of_gib > 0 else 1.0


def compare(facts: LogFacts, plan: Plan) -> list[Comparison]:
    r, out = plan.per_rank, []
    obs_rank = facts.first_rank()
    obs_tokens = facts.kv_tokens if facts.kv_tokens is not None else (obs_rank.kv_tokens if obs_rank else None)
    rest_gib = r.kv_tokens * r.kv_bytes_per_token / GiB
    # P and weights each carry ± 0.005 GiB; the slack P × (1 - fraction) a little more
    tol = max(0.0005, _rel(3 * HALF_CENT, rest_gib))
    if obs_tokens is not None:
        c = Comparison("kv_tokens", "per rank", obs_tokens, r.kv_tokens, tol)
        if c.ok is False:
            c.note = ("likely cause: a different KV dtype or page size, a mem_fraction_static the log does not show, "
                      "or allocations before KV sizing kvplan does not model (draft model, LoRA, multimodal cache)")
        out.append(c)
    if obs_rank is None:
        return out
    pool_obs = obs_rank.kv_size_gib if obs_rank.kv_size_gib is not None else (
        (obs_rank.k_size_gib or 0) + (obs_rank.v_size_gib or 0) if obs_rank.k_size_gib is not None else None)
    if pool_obs is not None:
        pred = r.kv_pool_bytes / GiB
        out.append(Comparison("kv_pool_gib", "per rank", pool_obs, round(pred, 3), _rel(2 * HALF_CENT, pool_obs),
                              "K + V buffers, one extra page included"))
    if obs_rank.weights_gib is not None:
        ckpt = sglang_settings(plan).checkpoint_weights_bytes_per_rank
        if ckpt:
            c = Comparison("weights_gib", "per rank", obs_rank.weights_gib, round(ckpt / GiB, 3), 0.03,
                           "log vs kvplan's checkpoint-based estimate (3 %: norms, biases, replicated pieces)")
            out.append(c)
    pool = r.static
    if obs_rank.pool_end_avail_gib is not None and pool is not None:
        pred = pool.headroom_after_pools_bytes / GiB
        out.append(Comparison("pool_end_avail_gib", "per rank", obs_rank.pool_end_avail_gib, round(pred, 3),
                              _rel(0.25, max(obs_rank.pool_end_avail_gib, 0.01)),
                              "free after KV + req_to_token (+0.17 GiB metadata); ± 0.25 GiB"))
    if obs_rank.graph_mem_gib is not None and pool is not None:
        out.append(Comparison("cuda_graph_gib", "per rank", obs_rank.graph_mem_gib,
                              round(pool.cuda_graph_bytes / GiB, 3), 0.5, "kvplan's graph figure is a calibration"))
    if obs_rank.host_pool_gb is not None and r.host_kv_bytes:
        out.append(Comparison("host_kv_gb", "per rank", obs_rank.host_pool_gb, round(r.host_kv_bytes / 1e9, 2),
                              _rel(0.005, obs_rank.host_pool_gb), "decimal GB, as SGLang prints it"))
    return out
