"""Scraping a live server: canned SGLang and vLLM endpoints on 127.0.0.1 (stdlib http.server), counters that
advance with time, missing endpoints, and a port where nothing listens.

The server's counters and the scraper read one virtual clock (``clock``), which moves only when the scraper sleeps
between scrapes: a rate read from two scrapes is exactly what the server advertises, however long a busy machine
takes over each HTTP round trip."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kvplan.diagnose.metrics import parse_prometheus, scrape
from kvplan.diagnose.run import diagnose
from kvplan.errors import KvplanError
from tests.waits import reserved_port

KIMI = "python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 --mem-fraction-static 0.85"


def _sglang_pages(t: float, launch: bool) -> dict[str, str]:
    info = {"model_path": "moonshotai/Kimi-K2.5", "tp_size": 8, "mem_fraction_static": 0.85, "dp_size": 1,
            "trust_remote_code": True, "version": "0.5.9",
            "scheduler_info": {"max_total_num_tokens": 116171, "max_req_input_len": 262139},
            "internal_states": [{"effective_max_running_requests_per_dp": 2048, "last_gen_throughput": 850.0,
                                 "memory_usage": {"weight": 71.85, "kvcache": 7.6, "token_capacity": 116171}}]}
    if launch:
        info["launch_command"] = KIMI
    lab = 'model_name="moonshotai/Kimi-K2.5",engine_type="unified",tp_rank="0",pp_rank="0"'
    metrics = "\n".join([
        "# HELP sglang:num_running_reqs The number of running requests.", "# TYPE sglang:num_running_reqs gauge",
        f"sglang:num_running_reqs{{{lab}}} {50 + int(t * 10) % 5}", f"sglang:num_queue_reqs{{{lab}}} 100.0",
        f"sglang:token_usage{{{lab}}} 0.91", f"sglang:num_used_tokens{{{lab}}} 105715.0",
        f"sglang:gen_throughput{{{lab}}} 850.0", f"sglang:max_total_num_tokens{{{lab}}} 116171.0",
        f'sglang:generation_tokens_total{{model_name="moonshotai/Kimi-K2.5"}} {850.0 * t:.1f}',
        f'sglang:prompt_tokens_total{{model_name="moonshotai/Kimi-K2.5"}} {900.0 * t:.1f}', ""])
    return {"/get_server_info": json.dumps(info), "/metrics": metrics}


def _vllm_pages(t: float) -> dict[str, str]:
    lab = 'engine="0",model_name="tiny"'
    cc = ('vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",gpu_memory_utilization="0.92",'
          'kv_cache_memory_bytes="1073741824",kv_cache_size_tokens="1048576",num_gpu_blocks="8192"} 1.0')
    metrics = "\n".join([cc, f"vllm:num_requests_running{{{lab}}} 2.0", f"vllm:num_requests_waiting{{{lab}}} 0.0",
                         f"vllm:kv_cache_usage_perc{{{lab}}} 0.002", f"vllm:num_preemptions_total{{{lab}}} 0.0",
                         f"vllm:generation_tokens_total{{{lab}}} {40.0 * t:.1f}",
                         f"vllm:prompt_tokens_total{{{lab}}} {10.0 * t:.1f}",
                         f"vllm:prefix_cache_queries_total{{{lab}}} {10.0 * t:.1f}",
                         f"vllm:prefix_cache_hits_total{{{lab}}} {5.0 * t:.1f}", ""])
    models = {"object": "list", "data": [{"id": "tiny", "root": "/nonexistent/tiny", "max_model_len": 2048}]}
    return {"/v1/models": json.dumps(models), "/metrics": metrics}


@pytest.fixture
def clock(monkeypatch):
    """(clock, sleep) of one virtual clock, also given to the scrapes diagnose() makes."""
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += max(0.0, s)

    def read() -> float:
        return now[0]

    monkeypatch.setattr("kvplan.diagnose.run.scrape", functools.partial(scrape, clock=read, sleep=sleep))
    return read, sleep


@contextmanager
def fake_server(kind: str, clock, launch: bool = False) -> Iterator[str]:
    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            t = clock()
            pages = _sglang_pages(t, launch) if kind == "sglang" else _vllm_pages(t)
            body = pages.get(self.path)
            if body is None:
                self.send_error(404)
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_parse_prometheus_labels_and_junk():
    s = parse_prometheus('# c\na{x="1",y="a,b"} 2.5\nb 3\nbad line\nc{z="q"} NaNx\n')
    assert s["a"] == [({"x": "1", "y": "a,b"}, 2.5)] and s["b"] == [({}, 3.0)] and "c" not in s


def test_sglang_live_server_is_kv_capacity_with_server_info(clock):
    with fake_server("sglang", clock[0]) as url:
        res = diagnose(url=url, window_s=1.0, gpu="rtx-pro-6000", host_mem_gib=449)
    d = res.to_dict()
    # one second of scrapes is too thin to name it (issue #12): unknown, leaning to kv-capacity
    assert d["bottleneck"] == "unknown" and d["secondary"][0]["id"] == "kv-capacity"
    assert d["engine"] == "sglang" and d["engine_version"] == "0.5.9"
    assert d["observed"]["pool_tokens"] == 116171 and d["observed"]["pool_source"] == "the server's info"
    assert d["observed"]["gen_tps"] == pytest.approx(850)  # from the counter, over the window
    assert d["observed"]["max_running"] == 2048
    step = next(lv for lv in d["levers"] if lv["name"] == "fraction 0.88")
    assert step["command"] is None  # rebuilt from the server's args: not the exact launch
    assert 30 <= step["kv_delta_pct"] <= 45


def test_sglang_launch_command_from_server_info_gives_commands(clock):
    with fake_server("sglang", clock[0], launch=True) as url:
        res = diagnose(url=url, window_s=0.6, gpu="rtx-pro-6000", host_mem_gib=449)
    assert res.command_source == "server_info launch_command"
    cmd = res.lever("DP attention").command
    assert cmd.startswith("python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8")
    assert "--enable-dp-attention --dp-size 8" in cmd  # (at its own largest check-safe fraction)


def test_vllm_live_server_is_client_bound_and_tolerates_missing_pieces(clock):
    with fake_server("vllm", clock[0]) as url:
        view = scrape(url, window_s=1.0, interval_s=0.2, clock=clock[0], sleep=clock[1])
        res = diagnose(url=url, window_s=0.6)
    assert view.engine == "vllm" and view.cache_config["num_gpu_blocks"] == "8192"
    assert any("/get_server_info" in e for e in view.errors)  # 404: tolerated
    s = view.samples[-1]
    assert s.running == 2 and s.queued == 0
    # the rate of the counter between two scrapes, 0.2 s apart on the shared clock: 40 tok/s every time
    rates = [x.gen_tps for x in view.samples if x.gen_tps]
    assert len(rates) == 5 and all(r == pytest.approx(40) for r in rates), rates
    assert s.prefix_hit == pytest.approx(0.5, abs=0.05)
    assert res.bottleneck == "unknown" and res.verdicts[1].id == "client-bound"  # 0.6 s: too thin to name it
    assert res.observed["pool_tokens"] == 1048576  # cache_config_info kv_cache_size_tokens
    assert any("levers are not priced" in n for n in res.notes)  # the model path is not on this machine


def test_nothing_listens():
    with reserved_port() as port:  # held, never listening: refused, and nobody else can listen there
        t = time.monotonic()
        with pytest.raises(KvplanError, match="connection refused"):  # an error, not an "unknown" diagnosis
            diagnose(url=f"http://127.0.0.1:{port}", window_s=600)
        assert time.monotonic() - t < 120  # does not wait out the 600 s window (a busy machine is slower, not 5x)
