"""The GPU of each rank as a stacked bar, read from ``kvplan check --json`` (per_rank, cluster, settings).

Nothing is re-planned here: every segment is a figure of the JSON, or the difference of two of them. The chart
follows the kind of GPU budget the JSON states, never the engine's name: a static pool (``per_rank.
mem_fraction_static`` is set: SGLang) or a request of a share of the GPU (``settings.requested_bytes_per_rank``:
vLLM). The only figure the JSON lacks, what is free when the engine checks its request at start-up, comes from the
engine (``Engine.startup_free_bytes``).

A static pool (``per_rank``; P = baseline_free_bytes, f = mem_fraction_static):
    GPU total = before P (CUDA context, NCCL) + weights + KV pool + req_to_token + CUDA graphs + other engine
    buffers + activation headroom (headroom_after_graphs_bytes, negative = does not fit)
    "other" = P − weights − KV pool − req_to_token − graphs − headroom_after_graphs (the engine's fixed pool
    buffers, Mamba state, multimodal reserve).
    Failure bands on the axis of the static-pool mark (before + P × f):
      * mark ≤ before + weights: the static pool holds no KV (kv-pool-empty; SGLang raises at start-up);
      * mark > before + P × f + headroom_after_graphs: req_to_token and the CUDA graphs no longer fit outside the
        pool (gpu-headroom-low's error condition, headroom_after_pools < cuda graphs: OOM at graph capture),
        at this plan's req_to_token and graph sizes.
A requested share (``settings``; R = requested_bytes_per_rank = ceil(total × gpu_memory_utilization)):
    weights + KV pool + activations and non-torch (non_kv − weights) + CUDA graphs (R − non_kv − kv budget)
    + KV budget rounding + left (total − R, outside the utilization).
    Failure bands on the axis of the utilization mark (R): below non_kv + graphs no KV block fits
    (kv-pool-empty); above what is free at start-up (vLLM: total − torch reserve − CUDA context), the engine refuses
    to start (gpu-util-startup-fail, ``v1/worker/utils.py::request_memory``).
"""

from __future__ import annotations

from typing import Any

from kvplan.report.html import fmt
from kvplan.report.html.stacked import Band, Mark, Row, Segment, StackedChart
from kvplan.units import MiB

COLORS = {"before": "#7f7f7f", "weights": "#4c72b0", "kv_pool": "#55a868", "req_to_token": "#dd8452",
          "cuda_graphs": "#8172b3", "other": "#b0b0b0", "activations": "#9ecae1", "non_kv": "#9ecae1",
          "kv_unused": "#c7e9c0", "left": "#eeeeee", "overflow": "#d62728"}
MAX_ROWS = 16


SHORT = {"weights": "weights", "kv_pool": "KV pool", "req_to_token": "req_to_token", "cuda_graphs": "graphs",
         "activations": "activations", "non_kv": "activations", "left": "left"}


def _seg(key: str, label: str, n: int, note: str = "") -> Segment:
    return Segment(key, label, int(n), COLORS[key], fmt.gib(n), note, SHORT.get(key, ""))


def _rows(d: dict[str, Any], segs: list[Segment]) -> tuple[Row, ...]:
    ranks = int(d["per_node"]["ranks"]) or 1
    return tuple(Row(f"rank {i}", tuple(segs)) for i in range(min(ranks, MAX_ROWS)))


def _title(d: dict[str, Any]) -> str:
    return f"GPU memory per rank ({d['per_node']['ranks']} ranks per node, planned alike)"


def _engine_name(d: dict[str, Any]) -> str:
    from kvplan.engines import ENGINES, get_engine

    name = str(d.get("engine"))
    return get_engine(name).display_name if name in ENGINES else name


def _startup_free(d: dict[str, Any], total: int) -> int | None:
    from kvplan.engines import ENGINES, get_engine

    name = str(d.get("engine"))
    return get_engine(name).startup_free_bytes(total) if name in ENGINES else None


def static_pool_chart(d: dict[str, Any]) -> StackedChart:
    r, total = d["per_rank"], d["cluster"]["gpu_mem_mib"] * MiB
    p, w, kv = r["baseline_free_bytes"], r["weights_bytes"], r["kv_pool_bytes"]
    r2t, graphs, act = r["req_to_token_bytes"], r["cuda_graph_bytes"], r["headroom_after_graphs_bytes"]
    before = max(0, total - p)
    other = p - w - kv - r2t - graphs - act
    segs = [_seg("before", "before weights (CUDA context, NCCL)", before, "GPU total − P"),
            _seg("weights", "weights", w), _seg("kv_pool", "KV pool", kv, f"{r['kv_tokens']:,} tokens"),
            _seg("req_to_token", "req_to_token", r2t), _seg("cuda_graphs", "CUDA graphs (estimate)", graphs),
            _seg("other", "other engine buffers", max(0, other)),
            _seg("activations", "activation headroom", max(0, act), "left after graphs, for prefill activations")]
    axis_end = before + p
    summary = [(f"free before weights P = {fmt.gib(p)} per rank; KV pool {fmt.gib(kv)} = {r['kv_tokens']:,} tokens "
                f"per rank; {fmt.gib(act)} left for activations after the CUDA graphs", False)]
    over = None
    if act < 0:
        over = Band("overflow", f"short by {fmt.gib(-act)}", axis_end, axis_end - act)
        summary.append((f"what must fit outside the static pool exceeds the GPU by {fmt.gib(-act)} per rank", True))
    marks, bands = [], []
    f = r.get("mem_fraction_static")
    if f is not None:
        at = before + int(p * f)
        marks.append(Mark("static_fraction", f"mem_fraction_static {f:g} (static pool ends)", at))
        bands.append(Band("fail_low", "kv-pool-empty: a static pool this small holds no KV", before, before + w))
        hi = at + act
        if hi < axis_end:
            bands.append(Band("fail_high", "OOM at CUDA-graph capture: req_to_token and graphs no longer fit",
                              max(before + w, hi), axis_end))
        lo_f, hi_f = w / p if p else 1.0, min(1.0, f + act / p) if p else 1.0
        inside = not lo_f < f <= hi_f
        summary.append((f"the engine fails with the static-pool mark in the red bands: fraction ≤ {lo_f:.3f} or "
                        f"> {hi_f:.3f} (at this plan's req_to_token and CUDA-graph sizes)"
                        + ("; this launch's fraction is in a band" if inside else ""), inside))
    return StackedChart("gpu-chart", _title(d), _rows(d, segs), tuple(s for s in segs if s.bytes > 0),
                        tuple(marks), tuple(bands), over, Mark("gpu_total", f"GPU total {fmt.gib(total)}", total),
                        tuple(summary))


def requested_share_chart(d: dict[str, Any]) -> StackedChart:
    r, s, total = d["per_rank"], d["settings"], d["cluster"]["gpu_mem_mib"] * MiB
    w, kv = r["weights_bytes"], r["kv_pool_bytes"]
    req, non_kv, budget = s.get("requested_bytes_per_rank"), s.get("non_kv_bytes_per_rank"), s.get(
        "kv_budget_bytes_per_rank")
    marks, bands, summary = [], [], []
    if s.get("platform") == "cpu":
        segs = [_seg("weights", "weights", w), _seg("kv_pool", "KV cache (host memory)", kv)]
        summary.append((f"{_engine_name(d)}-CPU: the KV cache ({fmt.gib(kv)} per rank, {s.get('kv_budget_source')}) "
                        "lives in host memory", False))
        return StackedChart("gpu-chart", "memory of each CPU worker", _rows(d, segs), tuple(segs), summary=tuple(
            summary))
    if req and non_kv is not None and budget is not None:
        graphs = max(0, req - non_kv - budget)
        segs = [_seg("weights", "weights", w), _seg("kv_pool", "KV cache", kv, f"{r.get('kv_blocks') or 0:,} blocks"),
                _seg("kv_unused", "KV budget below one block", max(0, budget - kv)),
                _seg("non_kv", "activation peak + non-torch (estimate)", max(0, non_kv - w)),
                _seg("cuda_graphs", "CUDA graphs (estimate)", graphs),
                _seg("left", "left (outside gpu_memory_utilization)", max(0, total - req))]
        util = s.get("gpu_memory_utilization")
        marks.append(Mark("static_fraction", f"gpu_memory_utilization {util:g}", req))
        bands.append(Band("fail_low", "kv-pool-empty: no KV block fits", 0, non_kv + graphs))
        start = _startup_free(d, total)
        start_fail = total if start is None else start
        if start_fail < total:
            bands.append(Band("fail_high", f"{_engine_name(d)} refuses to start: requested > free memory", start_fail,
                              total))
        summary.append((f"{_engine_name(d)} requests {fmt.gib(req)} per rank (utilization {util:g}); KV cache "
                        f"{fmt.gib(kv)} = {r['kv_tokens']:,} tokens per rank", False))
        fails = not non_kv + graphs < req <= start_fail
        above = f" or above {fmt.gib(start_fail)} (more than is free)" if start is not None else ""
        summary.append((f"the engine fails with the utilization mark in the red bands: below "
                        f"{fmt.gib(non_kv + graphs)} (no KV block){above}"
                        + ("; this launch's utilization is in a band" if fails else ""), fails))
    else:  # an exact KV size (--kv-cache-memory-bytes, --kv-memory-gib): the rest is not modeled
        segs = [_seg("weights", "weights", w), _seg("kv_pool", "KV cache", kv, str(s.get("kv_budget_source"))),
                _seg("left", "not modeled (activations, graphs, free)", max(0, total - w - kv))]
        summary.append((f"KV cache {fmt.gib(kv)} per rank from {s.get('kv_budget_source')}", False))
    return StackedChart("gpu-chart", _title(d), _rows(d, segs), tuple(x for x in segs if x.bytes > 0), tuple(marks),
                        tuple(bands), None, Mark("gpu_total", f"GPU total {fmt.gib(total)}", total), tuple(summary))


def gpu_chart(d: dict[str, Any]) -> StackedChart:
    """The chart of the budget kind the JSON states: a requested share when the settings carry the request (and no
    static pool is set), else a static pool."""
    requested = "requested_bytes_per_rank" in (d.get("settings") or {})
    static = d["per_rank"].get("mem_fraction_static") is not None
    return requested_share_chart(d) if requested and not static else static_pool_chart(d)
