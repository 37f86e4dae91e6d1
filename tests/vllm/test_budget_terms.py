"""The typed budget terms: which ones a version subtracts, and the range an integrator derives a band from.

Ground truth is the engine code: ``envs.py`` VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default "0" in the 0.19.0
wheel and "1" in the 0.20.0 wheel; ``gpu_worker.py::determine_available_memory`` skips the graph estimate when
``cudagraph_mode`` is NONE (``--enforce-eager``); ``--kv-cache-memory-bytes`` skips profiling (0.10.2+).
"""

from __future__ import annotations

import pytest

from kvplan import check

GiB = 2**30
CMD = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]


def _plan(cmd, version, **kw):
    return check(cmd, gpu="h100", engine_version=version, host_mem_gib=256, **kw).plan


def _names(plan):
    return [t.name for t in plan.settings.kv_budget_terms]


@pytest.mark.parametrize("version, prefix, extra, graphs", [
    ("0.19.0", [], [], False),
    ("0.20.0", [], [], True),
    ("0.33.0", [], ["--enforce-eager"], False),
    ("0.33.0", ["VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0"], [], False),
    ("0.18.0", ["VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1"], [], True),
    # Model Runner V2 (dense Llama: default from 0.23) estimates no graph memory before 0.29 (runner_v2.py)
    ("0.22.0", [], [], True),
    ("0.23.0", [], [], False),
    ("0.26.0", [], [], False),
    ("0.27.1", ["VLLM_USE_V2_MODEL_RUNNER=0"], [], True),
    ("0.29.0", [], [], True),
])
def test_cudagraph_term_follows_the_version_and_flags(version, prefix, extra, graphs):
    p = _plan([*prefix, *CMD, *extra], version)
    assert ("cudagraph-estimate" in _names(p)) is graphs
    assert p.settings.kv_budget_exact is False


@pytest.mark.parametrize("model, graphs", [("Qwen/Qwen3-30B-A3B", True), ("Qwen/Qwen3-8B", False)])
def test_model_runner_v2_default_is_dense_only_in_0_27(model, graphs):
    """0.27 ``_is_default_v2_model_runner_model``: a MoE outside the V2 list keeps the V1 runner and its estimate."""
    p = _plan(["vllm", "serve", model, "--max-model-len", "8192"], "0.27.1")
    assert ("cudagraph-estimate" in _names(p)) is graphs


def test_terms_add_up_and_range_brackets_the_value():
    """available = ceil((total - reserve) x gmu) - sum(costs); the range adds the terms' spreads in quadrature, so
    each side lies between the largest single spread and the sum of all spreads."""
    p = _plan(CMD, "0.33.0")
    s = p.settings.to_dict()
    terms = {t["name"]: t for t in s["kv_budget_terms"]}
    costs = sum(t["bytes"] for n, t in terms.items() if n != "torch-total-reserve")
    avail = s["kv_budget_bytes_per_rank"]
    assert s["requested_bytes_per_rank"] - costs == avail
    lo, hi = s["kv_budget_range_bytes_per_rank"]
    assert lo < avail < hi
    # weights synthesized from config.json (no checkpoint here): +- the 90 % quantile of the weights' error on the
    # vLLM logs of engines/spreads.json (a fraction of the weights, between 0 and the 1.2 % largest error read)
    from kvplan.engines import spreads

    w = terms["weights"]
    observed = spreads.spread("vllm", "weights")
    assert observed is not None and observed.unit == "fraction" and 0 < observed.value <= 0.012
    spread = observed.bytes_of(w["bytes"])
    assert (w["low_bytes"], w["high_bytes"]) == (w["bytes"] - spread, w["bytes"] + spread)
    down = [t["high_bytes"] - t["bytes"] for n, t in terms.items() if n != "torch-total-reserve"]
    up = [t["bytes"] - t["low_bytes"] for n, t in terms.items() if n != "torch-total-reserve"]
    assert max(down) <= avail - lo <= sum(down) + terms["torch-total-reserve"]["high_bytes"] + 0.015 * avail
    assert max(up) <= hi - avail <= sum(up) + terms["torch-total-reserve"]["bytes"] + 0.015 * avail
    for name in ("activation-peak", "non-torch", "cudagraph-estimate", "torch-total-reserve"):
        t = terms[name]
        assert t["low_bytes"] <= t["bytes"] <= t["high_bytes"] and t["low_bytes"] < t["high_bytes"], name
        assert t["source"]
    # H100 (8192 tokens, 1024 sequences in 0.33 `vllm serve`)
    assert s["max_num_batched_tokens"] == 8192 and s["max_num_seqs"] == 1024
    # the plan's token band is the capacity at the budget's ends (Llama-3.1-8B: 128 KiB per token, block 16)
    r = p.per_rank
    assert r.kv_tokens_range[0] < r.kv_tokens < r.kv_tokens_range[1]
    assert abs(r.kv_tokens_range[0] - lo // (128 * 1024) // 16 * 16) <= 16 * 2


@pytest.mark.parametrize("cmd, opts", [
    ([*CMD, "--kv-cache-memory-bytes", "20G"], {}),
    (CMD, {"kv_memory_gib": 20.0}),
])
def test_exact_budget_collapses_the_band(cmd, opts):
    p = _plan(cmd, "0.33.0", **opts)
    s = p.settings.to_dict()
    assert s["kv_budget_exact"] and s["kv_budget_terms"] == []
    assert s["kv_budget_range_bytes_per_rank"] == [20 * GiB, 20 * GiB] == [s["kv_budget_bytes_per_rank"]] * 2
    assert p.per_rank.kv_tokens_range == (p.per_rank.kv_tokens, p.per_rank.kv_tokens)  # the band collapses


def test_v0_activation_grows_with_max_model_len():
    """V0 without chunked prefill profiles T = max_model_len tokens (config.py::SchedulerConfig), so a longer
    --max-model-len leaves less KV; V1 chunks at 8192 on an H100 and does not."""
    v0 = [_plan(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", n], "0.6.4")
          for n in ("8192", "30000")]
    v1 = [_plan(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", n], "0.11.0")
          for n in ("8192", "30000")]
    assert v0[1].settings.kv_budget_bytes_per_rank < v0[0].settings.kv_budget_bytes_per_rank
    assert v1[1].settings.kv_budget_bytes_per_rank == v1[0].settings.kv_budget_bytes_per_rank


def test_every_calibration_is_sourced_publicly_and_brackets_its_value():
    """Issue #11 item 5: each constant named, with a public URL (a tag-pinned code link or the issue/PR of the log)."""
    from kvplan.engines.vllm import calibration as cal

    names = [n for n, v in vars(cal).items() if isinstance(v, cal.Calibration)]
    assert len(names) == len(cal.ALL) and len(names) >= 10
    for c in cal.ALL:
        urls = [u.strip(" ,") for u in c.source.split() if u.startswith("http")]
        assert urls and all(u.startswith("https://github.com/") for u in urls), c
        assert "/work/" not in c.source and "../" not in c.source
        code = [u for u in urls if "/blob/" in u and "vllm-project/vllm" in u]
        assert all("/blob/v0." in u for u in code), code  # code links pinned to a release tag
        assert c.low <= c.value <= c.high and c.what
