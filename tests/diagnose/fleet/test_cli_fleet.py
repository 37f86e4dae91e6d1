"""The command line of diagnose --prometheus: its JSON, its report, --html, -f - (stdin) and its exit codes (each
error one line, exit 2)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import run_cli
from tests.diagnose.fleet.fake_api import FakeProm, Target, serve
from tests.diagnose.fleet.pages import KV_CC, sglang_recorded, vllm_page

NOW = time.time()


def _fake() -> FakeProm:
    """Replicas whose scrapes end now (the CLI's window ends at the clock's now)."""
    t0 = NOW - 120
    return FakeProm([Target({"job": "vllm", "instance": "127.0.0.1:8001"},
                            vllm_page("Qwen/Qwen3-8B", 4, 20, 0.97, 60.0, 30.0, KV_CC, t0=t0), t0, NOW + 600),
                     Target({"job": "sglang", "instance": "127.0.0.1:30000", "pod": "sglang-llama-0"},
                            sglang_recorded(t0), t0, NOW + 600)])


def test_json_report_and_html(tmp_path):
    with serve(_fake()) as url:
        code, out, err = run_cli(["diagnose", "--prometheus", url, "--window", "20", "--json", "--gpu", "h100",
                                  "--html", str(tmp_path / "fleet.html")])
        assert code == 0, err
        d = json.loads(out)
        assert {"schema_version", "prometheus", "match", "window_s", "step_s", "replicas", "fleet", "notes"} <= set(d)
        for r in d["replicas"]:
            assert {"instance", "engine", "model", "bottleneck", "evidence", "levers", "observed",
                    "launch_source"} <= set(r)
        assert {r["instance"]: r["bottleneck"] for r in d["replicas"]} == {"127.0.0.1:8001": "kv-capacity",
                                                                           "127.0.0.1:30000": "kv-capacity"}
        assert {"replicas", "bottlenecks", "deployments", "levers", "elapsed_s", "requests"} <= set(d["fleet"])
        html = (tmp_path / "fleet.html").read_text()
        assert 'data-instance="127.0.0.1:8001" data-bottleneck="kv-capacity"' in html and "fleet-levers" in html
        code, out, err = run_cli(["diagnose", "--prometheus", url, "--window", "20", "--gpu", "h100"])
        assert code == 0 and "kv-capacity" in out and "Levers that help most" in out and "127.0.0.1:8001" in out


def test_launches_from_stdin():
    with serve(_fake()) as url:
        p = subprocess.run([sys.executable, "-m", "kvplan", "diagnose", "--prometheus", url, "--window", "20",
                            "--json", "-f", "-", "--gpu", "h100"], input="vllm serve Qwen/Qwen3-8B --port 8001\n",
                           capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    r = next(r for r in json.loads(p.stdout)["replicas"] if r["instance"] == "127.0.0.1:8001")
    assert r["launch_source"].endswith("matched by port 8001 of instance 127.0.0.1:8001")
    assert r["command"] == "vllm serve Qwen/Qwen3-8B --port 8001"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args,message", [
    (["--prometheus", f"http://127.0.0.1:{_closed_port()}"], "connection refused"),
    (["--prometheus", "ftp://x"], "not an http(s) URL"),
    (["--prometheus", "http://u:p@127.0.0.1:9"], "credentials in the URL are refused"),
    (["--match", 'job="x"', "--log", "x.log"], "--match goes with --prometheus URL"),
    (["--prometheus", "http://127.0.0.1:9", "--url", "http://127.0.0.1:8000"], "without --url"),
    (["--prometheus", "http://127.0.0.1:9", "--match", "vllm:x{"], "not a label matcher"),
    (["--prometheus", "http://127.0.0.1:9", "-f", "/nonexistent/k8s.yaml"], "cannot read /nonexistent/k8s.yaml"),
])
def test_errors_are_one_line_and_exit_2(args, message):
    code, out, err = run_cli(["diagnose", *args])
    assert code == 2 and message in err and "Traceback" not in err, err
    assert len([x for x in err.splitlines() if x.strip()]) <= 2  # the error and its hint


def test_no_engine_series_exits_2():
    with serve(_fake()) as url:
        code, _, err = run_cli(["diagnose", "--prometheus", url, "--match", 'job="none"'])
    assert code == 2 and "no SGLang or vLLM series over the last 300 s" in err
