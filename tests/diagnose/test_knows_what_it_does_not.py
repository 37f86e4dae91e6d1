"""diagnose says what it does not know (issue #12): too few samples is "unknown" with the numbers, a client-bound
server gets no launch changes as fixes, throughput is capped by the step time, a closed port is an error, the
progress bar never mixes with --json, and the incident's log is priced without --gpu."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from kvplan.cli.progress import wanted
from kvplan.diagnose.metrics import scrape
from kvplan.diagnose.postprice import step_factor
from kvplan.diagnose.rules import RuleContext, classify
from kvplan.diagnose.run import diagnose
from kvplan.diagnose.stats import Sample
from kvplan.diagnose.window import build
from tests.conftest import run_cli
from tests.diagnose.incident_log import POOL, incident_lines, write_incident_log
from tests.waits import reserved_port


def _win(rows: list[dict], dt: float | None):
    return build([Sample(kind="stats", fmt="vllm-v1", t=None if dt is None else dt * i, **r)
                  for i, r in enumerate(rows)], "vllm")


def test_two_samples_over_ten_seconds_are_unknown_with_the_numbers():
    # requests wait while the pool is full: kv-capacity with enough samples, "unknown" from two
    rows = [dict(running=40, queued=20, usage=0.97, gen_tps=800.0)] * 2
    v = classify(RuleContext(_win(rows, 10.0), "vllm"))
    assert v[0].id == "unknown" and "2 samples over 10 s" in v[0].cause and "need ≥ 3 samples over ≥ 10 s" in v[0].cause
    assert v[1].id == "kv-capacity"  # what it leans to, kept as secondary
    enough = classify(RuleContext(_win(rows * 2, 10.0), "vllm"))  # 4 samples over 30 s
    assert enough[0].id == "kv-capacity"


def test_three_samples_within_two_seconds_are_too_short():
    v = classify(RuleContext(_win([dict(running=1, queued=0, usage=0.05, gen_tps=50.0)] * 3, 1.0), "vllm"))
    assert v[0].id == "unknown" and "3 samples over 2 s" in v[0].cause


def test_samples_without_timestamps_are_judged_on_their_count():
    v = classify(RuleContext(_win([dict(running=1, queued=0, usage=0.05, gen_tps=50.0)] * 2, None), "vllm"))
    assert v[0].id == "unknown" and "span unknown" in v[0].cause


def test_a_retraction_is_evidence_even_in_a_short_window():
    lines = ["[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 30, #token: 9000, token usage: 0.70, cuda graph: "
             "True, gen throughput (token/s): 300.00, #queue-req: 0",
             "[2026-01-01 00:00:02 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, "
             "#new_tokens_gained: 800, #new_token_ratio: 0.4 -> 0.8"]
    from kvplan.diagnose.stats import parse_samples

    assert classify(RuleContext(build(parse_samples(lines), "sglang"), "sglang"))[0].id == "kv-capacity"


def test_client_bound_server_gets_no_launch_fixes(tmp_path):
    # the incident's startup (SGLang 0.5.9, Kimi-K2.5 TP8) serving 2 requests: nothing waits, the pool 3 % full
    head = [ln for ln in incident_lines(decode_lines=0)]
    serving = [f"[2026-02-24 11:00:{10 * i:02d} TP0] Decode batch, #running-req: 2, #token: 3500, token usage: "
               "0.03, cuda graph: True, gen throughput (token/s): 60.00, #queue-req: 0" for i in range(5)]
    log = tmp_path / "idle.log"
    log.write_text("\n".join(head + serving) + "\n")
    res = diagnose(log=str(log), gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition", engine_version="0.5.9")
    assert res.bottleneck == "client-bound"
    assert [lv.name for lv in res.levers] == ["current"]
    assert any("client's concurrency" in n and "fraction 0.88" in n for n in res.notes)


def test_step_factor_by_hand():
    # W = 100 GB of weights per rank, c = 100,000 B per token, a = 1,000 tokens per request in flight:
    # 10 running read 100e9 + 10 × 1,000 × 1e5 = 101e9 B per step, 100 running 110e9 B: the step is 110/101 longer
    plan = SimpleNamespace(per_rank=SimpleNamespace(weights_bytes=100 * 10**9, kv_bytes_per_token=100_000))
    w = _win([dict(running=10, queued=5, tokens=10_000, usage=0.9, gen_tps=500.0)] * 4, 10.0)
    assert step_factor(plan, w, 100) == pytest.approx(101 / 110)  # type: ignore[arg-type]
    assert step_factor(plan, w, 10) == pytest.approx(1.0)  # type: ignore[arg-type]


def test_incident_log_is_priced_without_a_gpu(tmp_path):
    # no --gpu: the GPU is bounded by the log ("Load weight begin. avail mem=93.48 GB" + "Init torch distributed
    # ends. mem usage=2.11 GB" = 95.59 GiB); the 0.85 -> 0.88 step adds 0.03 × 93.48 GiB / 70,272 B = 42,851 tokens
    # = +36.9 % of the 116,171 the log printed
    log = write_incident_log(tmp_path / "sglang_inference.log")
    res = diagnose(log=str(log))
    assert res.bottleneck == "kv-capacity"
    cur, step = res.lever("current"), res.lever("fraction 0.88")
    assert cur is not None and cur.kv_tokens == POOL
    assert step is not None and 33 <= (step.kv_delta_pct or 0) <= 42
    assert any(n.startswith("GPU memory.total") and "93.48" in n for n in res.notes)
    hicache = res.lever("HiCache")
    assert hicache is None or hicache.kv_tokens == POOL  # HiCache adds no concurrency


def test_closed_port_is_an_error_within_the_timeout():
    # the port is held (bound, never listening) so nobody else can listen there; a 600 s window: an answer well
    # before it (120 s leaves a busy machine its interpreter start-up) is one that did not wait the window out
    with reserved_port() as port:
        t = time.monotonic()
        code, out, err = run_cli(["diagnose", "--url", f"http://127.0.0.1:{port}", "--window", "600"])
        assert time.monotonic() - t < 120
    assert code == 2 and "connection refused" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_progress_is_reported_while_sampling():
    calls: list[tuple[float, float]] = []
    now = [0.0]

    def clock() -> float:
        return now[0]

    def sleep(s: float) -> None:
        now[0] += s

    def get(url, sink, *args, **kw):  # a vLLM /metrics page; everything else 404
        from kvplan.diagnose import http

        if not url.endswith("/metrics"):
            raise http.HttpError("HTTP 404", code=404)
        sink(b"vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n")
        return http.Response(url, 200)

    view = scrape("http://127.0.0.1:9", window_s=4.0, interval_s=1.0, get=get, sleep=sleep, clock=clock,
                  progress=lambda e, w: calls.append((e, w)))
    assert view.n_scrapes == 5 and len(calls) == 5  # one update per scrape: at 0, 1, 2, 3, 4 s of the 4 s window
    assert [round(e) for e, _ in calls] == [0, 1, 2, 3, 4] and all(w == 4.0 for _, w in calls)

    class TTY:
        def isatty(self) -> bool:
            return True

    assert wanted(False, TTY()) and not wanted(True, TTY())  # a bar on a terminal, never beside --json


def test_a_server_that_is_no_engine_is_named_so():
    def get(url, sink, *args, **kw):  # answers /metrics with a page of no engine's metrics; the rest 404
        from kvplan.diagnose import http

        if not url.endswith("/metrics"):
            raise http.HttpError("HTTP 404", code=404)
        sink(b"node_cpu_seconds_total 12\n")
        return http.Response(url, 200)

    from kvplan.diagnose.reach import unreachable

    view = scrape("http://127.0.0.1:9", window_s=1.0, interval_s=0.5, get=get, sleep=lambda s: None)
    why = unreachable(view)
    assert why is not None and "not an engine kvplan reads (SGLang or vLLM" in why
