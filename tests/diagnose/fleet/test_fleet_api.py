"""``diagnose --prometheus`` against a model of the Prometheus HTTP API (tests/diagnose/fleet/fake_api.py): replicas
grouped and judged right, the same numbers as ``diagnose --url`` on the same pages, memory bounded by the series
count whatever the window, and every hostile answer a one-line error or a note. No Prometheus, no engine."""

from __future__ import annotations

import base64
import json
import time
import tracemalloc

import pytest

from kvplan.diagnose.fleet.run import diagnose_fleet
from kvplan.errors import KvplanError
from tests.diagnose.fleet.fake_api import FakeProm, Target, respond, serve
from tests.diagnose.fleet.pages import KV_CC, sglang_recorded, vllm_page

T0 = 1_800_000_000.0
MODEL = "Qwen/Qwen3-8B"


def _kv_vllm(instance: str, t1: float, engines: int = 1, **labels: str) -> Target:
    page = vllm_page(MODEL, running=4 * engines, waiting=20 * engines, usage=0.97, gen_tps=60.0 * engines,
                     prompt_tps=30.0 * engines, cc=KV_CC, engines=engines, t0=T0)
    return Target({"job": "vllm", "instance": instance, **labels}, page, T0, t1)


def _client_vllm(instance: str, t1: float) -> Target:
    cc = {**KV_CC, "kv_cache_size_tokens": "262144", "num_gpu_blocks": "16384"}
    return Target({"job": "vllm", "instance": instance}, vllm_page(MODEL, 1, 0, 0.08, 25.0, 0.0, cc, t0=T0,
                                                                   wobble=False), T0, t1)


def _sglang(instance: str, t1: float) -> Target:
    return Target({"job": "sglang", "instance": instance, "pod": "sglang-llama-0"}, sglang_recorded(T0), T0, t1)


def _three(t1: float) -> FakeProm:
    return FakeProm([_kv_vllm("127.0.0.1:8001", t1), _client_vllm("127.0.0.1:8002", t1), _sglang("10.0.0.7:30000",
                                                                                                  t1)])


def _run(fake: FakeProm, window: float = 20, **kw):
    with serve(fake) as url:
        return diagnose_fleet(url, window_s=window, now=lambda: T0 + 60, env={}, **kw).to_dict()


def test_three_replicas_each_with_its_bottleneck():
    d = _run(_three(T0 + 60), gpu="h100")
    by = {r["instance"]: r for r in d["replicas"]}
    assert set(by) == {"127.0.0.1:8001", "127.0.0.1:8002", "10.0.0.7:30000"}
    assert by["127.0.0.1:8001"]["bottleneck"] == "kv-capacity" and by["127.0.0.1:8001"]["engine"] == "vllm"
    assert by["127.0.0.1:8002"]["bottleneck"] == "client-bound"
    assert by["10.0.0.7:30000"]["bottleneck"] == "kv-capacity" and by["10.0.0.7:30000"]["engine"] == "sglang"
    kv = by["127.0.0.1:8001"]["observed"]
    # 1 s scrapes, a 20 s window: the 21 scrapes at T0+40 .. T0+60 (each one step of the grid)
    assert kv["samples"] == 21 and kv["span_s"] == 20 and kv["queued"] == 20 and kv["kv_usage"] == 0.97
    assert kv["gen_tps"] == pytest.approx(60, rel=1e-6) and kv["pool_tokens"] == 8192
    sg = by["10.0.0.7:30000"]["observed"]
    assert sg["pool_tokens"] == 444500 and sg["running"] == pytest.approx(108.2, abs=0.5)
    assert sg["gen_tps"] == pytest.approx(2951, abs=15)  # the recorded counter steps, 2,938-2,966 per second
    assert by["10.0.0.7:30000"]["pod"] == "sglang-llama-0"
    f = d["fleet"]
    assert f["bottlenecks"] == {"kv-capacity": 2, "client-bound": 1} and f["replicas"] == 3 and f["requests"] == 4
    deps = {(x["job"], x["model"]): x["replicas"] for x in f["deployments"]}
    assert deps == {("vllm", MODEL): 2, ("sglang", "meta-llama/Meta-Llama-3.1-8B-Instruct"): 1}
    names = [lv["name"] for lv in f["levers"]]
    assert "fp8 KV" in names  # priced on both KV-bound replicas
    fp8 = next(lv for lv in f["levers"] if lv["name"] == "fp8 KV")
    assert sorted(fp8["replicas"]) == ["10.0.0.7:30000", "127.0.0.1:8001"] and fp8["kv_tokens_gain"] > 0
    assert d["schema_version"] == 1 and d["step_s"] == 1 and "series" not in by["127.0.0.1:8001"]


def test_dp_engines_of_one_replica_add_up():
    d = _run(FakeProm([_kv_vllm("127.0.0.1:8001", T0 + 60, engines=2)]))
    (r,) = d["replicas"]
    assert r["observed"]["queued"] == 40 and r["observed"]["gen_tps"] == pytest.approx(120, rel=1e-6)
    assert r["observed"]["running"] == pytest.approx(8, abs=0.1)


def test_same_numbers_as_diagnose_url_on_the_same_pages(monkeypatch):
    """One vLLM KV-bound replica: ``--url`` scraping its pages once a second (a clock of our own) and the fleet
    reading the same pages from Prometheus at the same times give the same diagnosis and the same levers."""
    from kvplan.diagnose import metrics
    from kvplan.diagnose.http import Response
    from kvplan.diagnose.run import diagnose

    page = _kv_vllm("127.0.0.1:8001", T0 + 60).page
    clock = [T0 + 40.0]

    def get(url, sink, deadline_s=5.0, max_bytes=1 << 24, partial=False, **_):
        if url.endswith("/metrics"):
            sink(page(clock[0]).encode())
        elif url.endswith("/v1/models"):
            sink(json.dumps({"data": [{"id": MODEL, "root": MODEL}]}).encode())
        else:
            from kvplan.diagnose.http import HttpError
            raise HttpError("HTTP 404", code=404)
        return Response(url, 200)

    def sleep(s):
        clock[0] += max(s, 0.0)

    real = metrics.scrape  # stop_by is a real-clock bound: the fake runs on its own clock
    monkeypatch.setattr("kvplan.diagnose.run.scrape", lambda url, window_s, progress=None, stop_by=None: real(
        url, window_s, interval_s=1.0, get=get, sleep=sleep, clock=lambda: clock[0]))
    url_d = diagnose(url="http://127.0.0.1:8001", window_s=20, gpu="h100").to_dict()
    fleet = _run(FakeProm([_kv_vllm("127.0.0.1:8001", T0 + 60)]), gpu="h100")["replicas"][0]
    assert fleet["bottleneck"] == url_d["bottleneck"] == "kv-capacity"
    assert fleet["evidence"][1:] == url_d["evidence"][1:]  # the first names its source
    assert url_d["observed"]["pool_source"] == "the server's info"
    assert fleet["observed"]["pool_source"] == "the metrics in Prometheus"
    drop = ("pool_source",)
    assert {k: v for k, v in fleet["observed"].items() if k not in drop} == \
        {k: v for k, v in url_d["observed"].items() if k not in drop}
    assert fleet["levers"] == url_d["levers"] and len(fleet["levers"]) >= 3


def test_memory_is_bounded_by_the_series_not_the_window():
    """Hours of 1 s scrapes (21,600 per replica in 6 h, 216,000 in 60 h) are read at a coarser step: at most 600
    points per series, so 60 hours cost what 6 hours cost."""
    end = T0 + 60 * 3600

    def peak(window: float) -> tuple[int, dict]:
        fake = FakeProm([_kv_vllm(f"127.0.0.1:{9000 + i}", end) for i in range(4)])
        with serve(fake) as url:
            diagnose_fleet(url, window_s=window, now=lambda: end, env={})  # the fake's own answers made first
            tracemalloc.start()
            d = diagnose_fleet(url, window_s=window, now=lambda: end, env={}).to_dict()
            size = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return size, d

    (minute, d1), (six, d6), (sixty, d60) = peak(60), peak(6 * 3600), peak(60 * 3600)
    print(f"peak traced memory: 60 s {minute / 2**20:.2f} MiB, 6 h {six / 2**20:.2f} MiB, 60 h {sixty / 2**20:.2f} MiB")
    assert d1["step_s"] == 1 and d6["step_s"] == pytest.approx(21600 / 599, abs=0.01)
    assert d60["step_s"] == pytest.approx(216000 / 599, abs=0.01)
    for d in (d6, d60):
        assert all(r["observed"]["samples"] == 599 and r["bottleneck"] == "kv-capacity" for r in d["replicas"])
    assert minute < six and sixty < 1.25 * six, (minute, six, sixty)


def test_a_replica_that_stopped_is_read_up_to_its_last_scrape():
    d = _run(FakeProm([_kv_vllm("127.0.0.1:8001", T0 + 50), _client_vllm("127.0.0.1:8002", T0 + 60)]), window=30)
    by = {r["instance"]: r["observed"] for r in d["replicas"]}
    assert by["127.0.0.1:8001"]["samples"] == 21 and by["127.0.0.1:8002"]["samples"] == 31


def test_match_narrows_the_fleet():
    d = _run(_three(T0 + 60), match='job="sglang"')
    assert [r["instance"] for r in d["replicas"]] == ["10.0.0.7:30000"] and d["match"] == 'job="sglang"'


def test_no_engine_series_is_an_error_with_a_hint():
    with pytest.raises(KvplanError, match=r"no SGLang or vLLM series over the last 20 s matching \{job=\"x\"\}"):
        _run(_three(T0 + 60), match='job="x"')


# ---- credentials and hostile answers ----

def test_bearer_token_and_basic_auth_come_from_the_environment_only():
    fake = _three(T0 + 60)
    with serve(fake) as url:
        diagnose_fleet(url, window_s=20, now=lambda: T0 + 60, env={"KVPLAN_PROMETHEUS_TOKEN": "s3cret"})
        assert {h.get("authorization") for _, h in fake.seen} == {"Bearer s3cret"}
        fake.seen.clear()
        diagnose_fleet(url, window_s=20, now=lambda: T0 + 60,
                       env={"KVPLAN_PROMETHEUS_USER": "u", "KVPLAN_PROMETHEUS_PASSWORD": "p:w"})
        assert {h.get("authorization") for _, h in fake.seen} == {"Basic " + base64.b64encode(b"u:p:w").decode()}
        with pytest.raises(KvplanError, match="credentials in the URL are refused"):
            diagnose_fleet(url.replace("http://", "http://u:p@"), env={})
        with pytest.raises(KvplanError, match="go together"):
            diagnose_fleet(url, env={"KVPLAN_PROMETHEUS_USER": "u"})
        with pytest.raises(KvplanError, match="line break"):
            diagnose_fleet(url, env={"KVPLAN_PROMETHEUS_TOKEN": "a\r\nX-Evil: 1"})


@pytest.mark.parametrize("route,status,body,match", [
    ("/api/v1/series", "401 Unauthorized", b"", r"HTTP 401 \(unauthorized\)"),
    ("/api/v1/series", "400 Bad Request", b'{"status":"error","errorType":"bad_data","error":"parse error at char 9"}',
     r"HTTP 400: parse error at char 9"),
    ("/api/v1/query_range", "503 Service Unavailable", b'{"status":"error","error":"query timed out"}',
     r"query_range: HTTP 503: query timed out"),
    ("/api/v1/series", "200 OK", b"<html>grafana login</html>", "not a JSON object"),
    ("/api/v1/series", "200 OK", b'{"status":"error","error":"boom"}', "boom"),
    ("/api/v1/series", "200 OK", b'{"status":"success","data":{"resultType":"matrix"}}', "not a JSON array"),
    ("/api/v1/query_range", "200 OK", b'{"status":"success","data":{"resultType":"matrix","result":[' + b"[" * 50000
     + b"]" * 50000 + b"]}}", "nested too deeply"),
    ("/api/v1/series", "302 Found\r\nLocation: /login", b"", r"redirect to .*/login refused \(only the URL given"),
])
def test_hostile_or_failing_answers_are_one_line_errors(route, status, body, match):
    fake = _three(T0 + 60)
    fake.routes[route] = respond(body, status)
    t = time.monotonic()
    with pytest.raises(KvplanError, match=match) as e:
        _run(fake)
    assert "\n" not in str(e.value) and time.monotonic() - t < 10


def test_a_dripping_server_ends_at_the_deadline(monkeypatch):
    import kvplan.diagnose.promapi as promapi

    monkeypatch.setattr(promapi, "DEADLINE_S", 1.5)
    fake = _three(T0 + 60)

    def drip(s):
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{")
        for _ in range(60):
            time.sleep(0.2)
            s.sendall(b" ")
    fake.routes["/api/v1/series"] = drip
    t = time.monotonic()
    with pytest.raises(KvplanError, match="no complete answer within 1.5 s"):
        _run(fake)
    assert time.monotonic() - t < 6


def test_an_oversized_answer_is_cut_with_a_note(monkeypatch):
    import kvplan.diagnose.promapi as promapi

    monkeypatch.setattr(promapi, "MAX_ANSWER_BYTES", 4096)
    d = _run(_three(T0 + 60))  # the range answers are longer than 4 KiB: cut, the series read kept
    assert any("the answer was cut at 4,096 bytes" in n for n in d["notes"])


def test_junk_points_and_series_are_left_out_with_notes():
    good = _three(T0 + 60)
    doc = json.loads(good.answer("/api/v1/query_range", {
        "query": 'sum by (__name__,job,namespace,pod,instance) ({__name__=~"vllm:num_requests_waiting"})',
        "start": str(T0 + 40), "end": str(T0 + 60), "step": "1"}))
    series = doc["data"]["result"]
    s0 = series[0]
    s0["values"][3][1] = "NaN"
    s0["values"][4][1] = "-5"
    s0["values"][5] = ["x", "1"]
    s0["values"][6] = [T0 + 40.37, "1"]  # off the grid
    series += [{"metric": {"__name__": "vllm:num_requests_waiting", "instance": "nobody:1"}, "values": [[T0, "1"]]},
               "junk", {"metric": [], "values": []}]
    real_answer = good.answer

    def answer(path, q):
        if path.endswith("query_range") and q["query"].startswith("sum by"):
            return json.dumps(doc).encode()
        return real_answer(path, q)
    good.answer = answer  # type: ignore[method-assign]
    d = _run(good)
    r = next(r for r in d["replicas"] if r["instance"] == s0["metric"]["instance"])
    assert any(n.startswith("ignored 4 point(s)") for n in r["notes"]), r["notes"]
    assert any("left out: 3 series" in n for n in d["notes"]), d["notes"]
