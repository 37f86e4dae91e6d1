"""What the fleet asks: --match checked, the PromQL of the four requests, the grid's bounds, replicas grouped from
the series' labels."""

from __future__ import annotations

import pytest

from kvplan.diagnose.fleet.discover import MAX_SERIES, Discovery
from kvplan.diagnose.fleet.query import names, scrapes_query, selector, series_match, values_query
from kvplan.diagnose.fleet.read import CELL_BUDGET, MAX_POINTS, grid
from kvplan.errors import KvplanError


@pytest.mark.parametrize("text,want", [
    (None, ""), ("  ", ""), ('job="vllm"', 'job="vllm"'), ('{job="vllm", namespace=~"llm-.*"}',
                                                               'job="vllm",namespace=~"llm-.*"'),
    ("pod!='a\\'b'", "pod!='a\\'b'"), ('a!~"x,y",b="}"', 'a!~"x,y",b="}"'),
])
def test_selector_accepts_label_matchers(text, want):
    assert selector(text) == want


@pytest.mark.parametrize("text,match", [
    ('vllm:num_requests_running{job="x"}', "not a label matcher"), ('{job="x"', "braces are not closed"),
    ('job="x', "not a label matcher"), ('job="x"} or vector(1) or {a="b"', "expected ','"),
    ('job="x" instance="y"', "expected ','"), ("a" * 1200, "at most 1000"),
    (",".join(f'l{i}="v"' for i in range(40)), "more than 32 matchers"), ('job=x', "not a label matcher"),
])
def test_selector_refuses_anything_else(text, match):
    with pytest.raises(KvplanError, match=match) as e:
        selector(text)
    assert "\n" not in str(e.value)


def test_every_engine_name_of_every_version_is_asked():
    from kvplan.engines import all_engines

    n = names()
    for e in all_engines():
        m = e.metrics
        assert m is not None
        for name in (*m.running, *m.waiting, *m.usage, *m.generation_tokens, *m.prompt_tokens, *m.preemptions):
            assert name in n.every
        assert n.engine_of_prefix[m.prefix] == e.name
    assert set(n.running) <= set(n.summed) and not set(n.summed) & set(n.peaked)
    for field in ("usage", "pool_tokens"):
        for e in all_engines():
            assert set(getattr(e.metrics, field)) <= set(n.peaked)


def test_the_promql_of_the_four_requests():
    n = names()
    sel = selector('job="vllm"')
    assert series_match(n, sel) == "{__name__=~\"" + "|".join(n.every) + "\",job=\"vllm\"}"
    assert scrapes_query(n, "") == ("max by (job,namespace,pod,instance) (timestamp({__name__=~\"" +
                                    "|".join(n.running) + "\"}))")
    assert values_query("sum", {"b:x", "a:y"}, sel) == \
        'sum by (__name__,job,namespace,pod,instance) ({__name__=~"a:y|b:x",job="vllm"})'


@pytest.mark.parametrize("window,series,step,n", [
    (20, 30, 1.0, 21), (30, 30, 1.0, 31), (0.5, 3, 1.0, 1), (6 * 3600, 30, 36.061, 599), (600, 30, 1.002, 599),
    (3600, 100_000, 400.0, 10),
])
def test_grid_bounds_points_and_cells(window, series, step, n):
    g = grid(1_800_000_000.0, window, series)
    assert g.step == pytest.approx(step) and g.n == n and g.end == pytest.approx(1_800_000_000.0)
    assert g.n <= MAX_POINTS and (g.n - 1) * series <= CELL_BUDGET
    assert g.index(g.start + 3 * g.step) == (3 if n > 3 else None) and g.index(g.start + 0.5 * g.step) is None


def _series(name: str, **labels: str) -> dict[str, str]:
    return {"__name__": name, **labels}


def test_series_group_into_replicas():
    d = Discovery(names())
    for e in ("0", "1"):  # two DP engines of one vLLM replica
        d.feed(_series("vllm:num_requests_running", job="vllm", instance="10.0.0.1:8000", pod="vllm-a-1",
                       engine=e, model_name="Qwen/Qwen3-8B"))
    d.feed(_series("vllm:cache_config_info", job="vllm", instance="10.0.0.1:8000", pod="vllm-a-1", engine="0",
                   block_size="16", kv_cache_size_tokens="1000"))
    d.feed(_series("sglang:num_running_reqs", job="sglang", instance="10.0.0.2:30000", tp_rank="0",
                   model_name="m"))
    d.feed(_series("vllm:cache_config_info", job="vllm", instance="10.0.0.3:8000"))  # no running gauge: no replica
    for junk in ("x", {"__name__": 5}, {"__name__": "node_load1", "instance": "n:9100"}, ["a"]):
        d.feed(junk)
    reps = d.done()
    assert [r.instance for r in reps] == ["10.0.0.2:30000", "10.0.0.1:8000"]  # by (job, namespace, pod, instance)
    sg, vl = reps
    assert vl.engine == "vllm" and vl.model == "Qwen/Qwen3-8B" and vl.series == 3
    assert vl.config == {"engine": "0", "block_size": "16", "kv_cache_size_tokens": "1000"}
    assert vl.labels == {"job": "vllm", "pod": "vllm-a-1", "instance": "10.0.0.1:8000"}
    assert sg.engine == "sglang" and sg.model == "m" and sg.config == {}
    assert d.ignored == 4 and d.series == 5


def test_discovery_is_bounded(monkeypatch):
    import kvplan.diagnose.fleet.discover as disc

    monkeypatch.setattr(disc, "MAX_SERIES", 10)
    monkeypatch.setattr(disc, "MAX_REPLICAS", 3)
    d = disc.Discovery(names())
    for i in range(50):
        d.feed(_series("vllm:num_requests_running", instance=f"h:{i}"))
    reps = d.done()
    assert d.series == 10 and len(reps) == 3
    assert any("more than 10 engine series" in n for n in d.notes) and any("10 replicas" in n for n in d.notes)
    assert MAX_SERIES == 100_000
