"""Per-component accuracy for ``benchmarks/preflight.py``: each memory term the plan predicts against every log that
prints it, per engine-version range. All figures per rank (GiB; SGLang's "GB" and vLLM's "GB" are GiB).

Logged keys (``observed`` in cases.jsonl) -> the plan's figure:

- vLLM: weights (``Model loading took``) -> ``kv_budget_terms`` weights; activation peak -> activation-peak (plus
  cudagraph-estimate from 0.27, whose printed peak includes the applied estimate);
  non-torch -> non-torch; CUDA-graph estimate (0.21+ profiling) -> cudagraph-estimate; ``Available KV cache
  memory`` -> ``settings.kv_budget_bytes_per_rank``.
- SGLang: ``Load weight begin. avail mem`` (baseline T) -> ``per_rank.baseline_free_bytes``; ``Load weight end ...
  mem usage`` -> ``per_rank.weights_bytes``; ``Capture cuda graph end ... mem usage`` -> ``per_rank.cuda_graph_bytes``;
  K + V size -> ``per_rank.kv_pool_bytes``.
- both: KV tokens (the headline figure of preflight.py).
"""

from __future__ import annotations

import statistics

GiB = float(1 << 30)
VLLM_KEYS = {
    "weights": ("weights_gib", "model_weights_gib", "weights_gib_per_rank", "model_loading_gib",
                "model_loading_gib_per_rank", "weights_gb", "weights_gb_per_rank"),
    "activation": ("peak_activation_gib", "activation_peak_gib"),
    "non-torch": ("non_torch_gib", "non_torch_memory_gib"),
    "graphs": ("cudagraph_estimated_gib", "cuda_graph_estimated_gib"),
    "kv memory": ("available_kv_cache_gib", "available_kv_cache_gib_per_rank", "available_kv_cache_gib_min"),
}
VLLM_TERMS = {"weights": "weights", "activation": "activation-peak", "non-torch": "non-torch",
              "graphs": "cudagraph-estimate"}
SGLANG_KEYS = {
    "baseline": ("load_begin_avail_gb",),
    "weights": ("load_mem_usage_gb", "weights_gb_per_rank"),
    "graphs": ("cuda_graph_mem_usage_gb",),
    "kv memory": ("kv_size_gb",),
}
COMPONENTS = ("baseline", "weights", "activation", "graphs", "non-torch", "kv memory", "kv tokens")


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _logged(obs: dict, keys: tuple[str, ...]) -> float | None:
    for k in keys:
        v = _num(obs.get(k))
        if v is not None:
            return v
    return None


def version_range(engine: str, version: str) -> str:
    """The engine-version range a case's error is reported under: the ranges the band's spreads are kept under
    (``kvplan.engines.spreads.version_range``)."""
    from kvplan.engines.spreads import version_range as spreads_range

    return spreads_range(engine, version)


def _logs_activation_with_graphs(tokens_row: dict) -> bool:
    """From 0.27.0 the 'peak activation' vLLM prints is ``transient_peak_headroom + cudagraph_memory_estimate_applied``
    (``gpu_worker.py::determine_available_memory``,
    https://github.com/vllm-project/vllm/blob/v0.27.0/vllm/v1/worker/gpu_worker.py); before, the torch peak alone."""
    from kvplan.engines.versions import Version
    from kvplan.errors import KvplanError

    try:
        return Version(str(tokens_row.get("version"))) >= Version("0.27.0")
    except KvplanError:
        return False


def component_errors(case: dict, plan: dict, tokens_row: dict) -> list[dict]:
    """(component, logged GiB, predicted GiB, band) rows of one planned case."""
    obs, out = case.get("observed") or {}, []
    rank, settings = plan.get("per_rank") or {}, plan.get("settings") or {}

    def add(comp: str, logged: float | None, pred_bytes: float | None, band: tuple[float, float] | None = None):
        if logged is None or pred_bytes is None:
            return
        out.append({"component": comp, "logged": logged, "predicted": pred_bytes / GiB,
                    "band": (band[0] / GiB, band[1] / GiB) if band else None})

    if plan.get("engine") == "vllm":
        terms = {t["name"]: t for t in settings.get("kv_budget_terms") or []}
        for comp, keys in VLLM_KEYS.items():
            if comp == "kv memory":
                r = settings.get("kv_budget_range_bytes_per_rank")
                add(comp, _logged(obs, keys), settings.get("kv_budget_bytes_per_rank"), tuple(r) if r else None)
                continue
            t = terms.get(VLLM_TERMS[comp])
            if t is not None:
                lo, mid, hi = t["low_bytes"], t["bytes"], t["high_bytes"]
                g = terms.get("cudagraph-estimate")
                if comp == "activation" and g is not None and _logs_activation_with_graphs(tokens_row):
                    lo, mid, hi = lo + g["low_bytes"], mid + g["bytes"], hi + g["high_bytes"]
                add(comp, _logged(obs, keys), mid, (lo, hi))
    else:
        for comp, keys in SGLANG_KEYS.items():
            logged = _logged(obs, keys)
            if comp == "kv memory" and logged is None and _num(obs.get("k_size_gb")) is not None:
                logged = (_num(obs.get("k_size_gb")) or 0.0) + (_num(obs.get("v_size_gb")) or 0.0)
            field = {"baseline": "baseline_free_bytes", "weights": "weights_bytes", "graphs": "cuda_graph_bytes",
                     "kv memory": "kv_pool_bytes"}[comp]
            add(comp, logged, rank.get(field))
    if tokens_row.get("error_pct") is not None:
        b = tokens_row.get("band")
        out.append({"component": "kv tokens", "logged": float(tokens_row["observed"]),
                    "predicted": float(tokens_row["predicted"]), "band": tuple(b) if b else None})
    return out


def table(rows: list[dict]) -> list[str]:
    """One line per (component, engine, version range): n, median signed and absolute error (% of the logged value,
    and GiB), share within 2 %, share inside the band (where the plan gives one)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["component"], r["engine"], r["range"]), []).append(r)
    out = [f"{'component':<11} {'engine':<7} {'versions':<13} {'n':>3} {'med err %':>9} {'med |err| %':>11} "
           f"{'med |err| GiB':>13} {'<=2 %':>6} {'in band':>8}"]
    order = {c: i for i, c in enumerate(COMPONENTS)}
    for key in sorted(groups, key=lambda k: (order.get(k[0], 99), k[1], k[2])):
        g = groups[key]
        errs = [(r["predicted"] - r["logged"]) / r["logged"] * 100 for r in g if r["logged"]]
        gib = [abs(r["predicted"] - r["logged"]) for r in g]
        if key[0] == "kv tokens":
            gib_s = "-"
        else:
            gib_s = f"{statistics.median(gib):.3f}"
        banded = [r for r in g if r["band"]]
        inside = sum(r["band"][0] <= r["logged"] <= r["band"][1] for r in banded)
        w2 = sum(abs(e) <= 2 for e in errs)
        med = f"{statistics.median(errs):+.1f}" if errs else "-"
        amed = f"{statistics.median(abs(e) for e in errs):.1f}" if errs else "-"
        band = f"{inside}/{len(banded)}" if banded else "-"
        out.append(f"{key[0]:<11} {key[1]:<7} {key[2]:<13} {len(g):>3} {med:>9} {amed:>11} {gib_s:>13} "
                   f"{f'{w2}/{len(errs)}':>6} {band:>8}")
    return out
