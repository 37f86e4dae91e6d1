"""Workloads: generated lengths and arrivals, request JSONL, and the result files of SGLang bench_serving (v0.5.9
``bench_serving.py``: one JSON result per line, ``input_lens``/``output_lens`` with --output-details) and vLLM
benchmark_serving (v0.10.2 ``benchmarks/serve.py``: one JSON object, ``e2el`` names, ``burstiness``)."""

from __future__ import annotations

import json

import pytest

from kvplan.errors import KvplanError
from kvplan.simulate.core.cluster import Driver
from kvplan.simulate.workload.files import load_file
from kvplan.simulate.workload.generate import generated


def test_generated_lengths_are_seeded_and_bounded():
    w = generated(2000, 1000, 4000, concurrency=150, prompt_dist="uniform:0.5", output_dist="range:0.25", seed=3)
    a, b = list(w.stream()), list(w.stream())
    assert a == b and len(a) == 2000
    assert all(500 <= it.prompt <= 1500 for it in a)
    assert all(1000 <= it.output <= 4000 for it in a)  # range:0.25 -> randint(1000, 4000), as bench_serving
    assert abs(sum(it.prompt for it in a) / 2000 - 1000) < 20


def test_shared_prefix_groups():
    w = generated(10, 100, 10, concurrency=2, shared_prefix=700, prefix_groups=3)
    items = list(w.stream())
    assert [it.prefix_id for it in items[:4]] == [0, 1, 2, 0]
    assert all(it.prompt == 800 and it.prefix_len == 700 for it in items)


@pytest.mark.parametrize("spec", ["bogus", "uniform:2", "range:-1", "lognormal:0", "uniform:x"])
def test_bad_distributions_are_refused(spec):
    with pytest.raises(KvplanError):
        generated(10, 100, 100, concurrency=1, output_dist=spec)


def test_a_workload_needs_a_pace():
    with pytest.raises(KvplanError, match="--concurrency"):
        generated(10, 100, 100)


def test_poisson_driver_mean_gap_and_concurrency_cap():
    w = generated(4000, 10, 10, rate=20.0, seed=1)
    d = Driver(w)
    times = []
    for i in range(4000):
        times.append(d.next_time())
        d.pop(i)
        d.release(times[-1])
    assert times == sorted(times)
    assert (times[-1] - times[0]) / 3999 == pytest.approx(1 / 20, rel=0.05)
    capped = Driver(generated(5, 10, 10, concurrency=2))
    capped.pop(1)
    capped.pop(2)
    assert capped.next_time() == float("inf")  # both clients busy
    capped.release(7.5)
    assert capped.next_time() == 7.5  # the next request goes when a client is free


def test_request_jsonl(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"prompt_len": 10, "output_len": 5, "arrival": 0.5}\n\n'
                 '{"input_len": 20, "output_tokens": 7, "timestamp": 1.0, "prefix_id": "sys", "prefix_len": 8}\n')
    w = load_file(str(p))
    items = list(w.stream())
    assert w.total == 2 and w.timed
    assert (items[0].prompt, items[0].output, items[0].arrival) == (10, 5, 0.5)
    assert (items[1].prompt, items[1].prefix_id, items[1].prefix_len) == (20, 0, 8)


@pytest.mark.parametrize("text,msg", [
    ('{"prompt_len": 10}\n', "output_len"),
    ('{"prompt_len": 0, "output_len": 3, "arrival": 1}\n', r"prompt_len 0 is out of range \[1, "),
    ('{"prompt_len": 1e400, "output_len": 3}\n', "prompt_len inf is not a finite number"),
    ('{"prompt_len": ' + "9" * 5000 + ', "output_len": 3}\n', r"a number of [0-9,]+ digits"),
    ('{"prompt_len": [[[[1]]]], "output_len": 3}\n', "prompt_len must be a number"),
    ("[" * 100_000 + "]" * 100_000 + "\n", "nested more than 64 levels"),
    ('{"prompt_len": 5, "output_len": 3, "arrival": 2}\n{"prompt_len": 5, "output_len": 3, "arrival": 1}\n', "back"),
    ("not json\n", "neither"),
    ("", "empty"),
])
def test_bad_request_files(tmp_path, text, msg):
    p = tmp_path / "bad.jsonl"
    p.write_text(text)
    with pytest.raises(KvplanError, match=msg):
        w = load_file(str(p), concurrency=2)
        list(w.stream())


def test_sglang_bench_serving_result(tmp_path):
    runs = [{"backend": "sglang", "dataset_name": "random", "request_rate": 4.0, "max_concurrency": 64,
             "random_input_len": 1024, "random_output_len": 512, "random_range_ratio": 0.5, "completed": 100,
             "total_input_tokens": 76800, "total_output_tokens": 38400, "duration": 120.0,
             "output_throughput": 320.0, "mean_ttft_ms": 150.0, "median_ttft_ms": 120.0, "p99_ttft_ms": 900.0,
             "mean_e2e_latency_ms": 9000.0, "median_e2e_latency_ms": 8500.0, "p99_e2e_latency_ms": 20000.0,
             "mean_tpot_ms": 20.0, "median_tpot_ms": 19.0, "p99_tpot_ms": 40.0},
            {"backend": "sglang", "dataset_name": "random", "request_rate": float("inf"), "max_concurrency": 8,
             "random_input_len": 100, "random_output_len": 50, "random_range_ratio": 1.0, "completed": 3,
             "total_input_tokens": 300, "total_output_tokens": 150, "input_lens": [100, 90, 110],
             "output_lens": [50, 40, 60], "duration": 3.0, "output_throughput": 50.0}]
    p = tmp_path / "sglang_1201_100_1024_512.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in runs) + "\n")  # bench_serving appends one result per line
    w = load_file(str(p))
    assert w.total == 3 and w.concurrency == 8 and w.rate is None  # the last run; "inf" rate = back to back
    assert [(it.prompt, it.output) for it in w.stream()] == [(100, 50), (90, 40), (110, 60)]
    p.write_text(json.dumps(runs[0]) + "\n")
    w = load_file(str(p))
    assert w.rate == 4.0 and w.concurrency == 64
    items = list(w.stream())
    assert all(512 <= it.prompt <= 1024 and 256 <= it.output <= 512 for it in items)  # randint(int(L×0.5), L)
    assert w.measured["ttft_s"]["p99"] == 0.9 and w.measured["e2e_s"]["mean"] == 9.0


def test_vllm_benchmark_serving_result(tmp_path):
    d = {"date": "20250901-120000", "backend": "vllm", "model_id": "m", "num_prompts": 10, "request_rate": "inf",
         "burstiness": 1.0, "max_concurrency": 4, "duration": 12.0, "completed": 10, "total_input_tokens": 2000,
         "total_output_tokens": 1000, "output_throughput": 83.3, "mean_ttft_ms": 50.0, "median_ttft_ms": 40.0,
         "p99_ttft_ms": 200.0, "mean_e2el_ms": 4000.0, "median_e2el_ms": 3900.0, "p99_e2el_ms": 7000.0}
    p = tmp_path / "vllm-infqps-concurrency4-m-20250901-120000.json"
    p.write_text(json.dumps(d))
    w = load_file(str(p))
    assert w.total == 10 and w.concurrency == 4 and w.rate is None
    assert {(it.prompt, it.output) for it in w.stream()} == {(200, 100)}  # means of the totals
    assert w.measured["e2e_s"]["p99"] == 7.0
