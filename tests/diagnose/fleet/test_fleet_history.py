"""Six hours of recorded data in a REAL Prometheus: the scrapes of three replicas every 15 s (the usual production
interval) written as OpenMetrics and loaded with Prometheus' own backfill (``promtool tsdb create-blocks-from
openmetrics``), then served by Debian's ``prometheus`` on 127.0.0.1 from that private data directory, scraping
nothing. Why the backfill rather than a fake API answering query_range: the blocks are Prometheus' own storage and
the answers its own query engine's (lookback, step alignment, ``timestamp()``, ``sum by (__name__, ...)``), so the
PromQL kvplan sends is tested against what real Prometheus does with hours of data; the fast tests
(test_fleet_api.py) already cover a model of the API.

The replicas: vLLM KV-bound (4 running, 20 waiting at 97 % of 8,192 tokens), vLLM client-bound (1 running at 8 %),
SGLang KV-bound (the recorded pages, one per scrape). ``--window 21600`` reads them at a 36 s step (599 points,
each a distinct 15 s scrape) with the same rules as a 20 s window, within 10 s, its peak memory that of a short
window.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kvplan.diagnose.prom import parse_prometheus
from tests.diagnose.fleet.live import run_measured
from tests.diagnose.fleet.pages import KV_CC, sglang_recorded, vllm_page
from tests.diagnose.fleet.prometheus_server import PROMTOOL, api, prometheus, require_prometheus, wait_until

pytestmark = pytest.mark.slow
SCRAPE_S, HOURS = 15.0, 6
MODEL = "Qwen/Qwen3-8B"


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def openmetrics(targets: list[tuple[dict[str, str], Callable[[float], str]]], times: list[float]) -> str:
    """Every scrape of every target as OpenMetrics: one family after another (gauges; ``*_total`` as counters),
    each series' samples in time order, timestamps in seconds, ``# EOF`` last. Histogram series are left out."""
    fams: dict[str, dict[tuple, list[tuple[float, float]]]] = {}
    for labels, page in targets:
        for t in times:
            for name, rows in parse_prometheus(page(t)).items():
                if name.endswith(("_bucket", "_count", "_sum")):
                    continue
                for lab, v in rows:
                    key = tuple(sorted({**lab, **labels}.items()))
                    fams.setdefault(name, {}).setdefault(key, []).append((t, v))
    out = []
    for name in sorted(fams):
        family = name.removesuffix("_total") if name.endswith("_total") else name
        out.append(f"# TYPE {family} {'counter' if name.endswith('_total') else 'gauge'}")
        for key, points in fams[name].items():
            lab = ",".join(f'{k}="{_escape(v)}"' for k, v in key)
            out += [f"{name}{{{lab}}} {v!r} {t:.3f}" for t, v in points]
    return "\n".join(out) + "\n# EOF\n"


def test_six_hours_of_recorded_scrapes_are_read_with_the_same_rules(tmp_path: Path):
    require_prometheus()
    end = math.floor((time.time() - 30) / SCRAPE_S) * SCRAPE_S
    start = end - HOURS * 3600
    times = [start + k * SCRAPE_S for k in range(int(HOURS * 3600 / SCRAPE_S) + 1)]
    client_cc = {**KV_CC, "kv_cache_size_tokens": "262144", "num_gpu_blocks": "16384"}
    targets = [({"job": "vllm", "instance": "10.0.0.1:8000"},
                vllm_page(MODEL, 4, 20, 0.97, 60.0, 30.0, KV_CC, t0=start)),
               ({"job": "vllm", "instance": "10.0.0.2:8000"},
                vllm_page(MODEL, 1, 0, 0.08, 25.0, 0.0, client_cc, t0=start, wobble=False)),
               ({"job": "sglang", "instance": "10.0.0.3:30000", "pod": "sglang-llama-0"},
                sglang_recorded(start))]
    om = tmp_path / "six-hours.om.txt"
    om.write_text(openmetrics(targets, times))
    data = tmp_path / "tsdb"
    p = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q", str(om), str(data)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    print(f"\n[history] {len(times)} scrapes x 3 targets, {om.stat().st_size / 2**20:.1f} MiB of OpenMetrics -> "
          f"{len(list(data.iterdir()))} block(s)")
    with prometheus(tmp_path, None, data_dir=data) as base:
        wait_until("the backfilled blocks answer", lambda: len(api(
            base, "/api/v1/series", **{"match[]": "vllm:num_requests_running", "start": str(start),
                                        "end": str(end)})) == 2, 60)
        six = run_measured(["diagnose", "--prometheus", base, "--window", str(HOURS * 3600), "--json"])
        ten = run_measured(["diagnose", "--prometheus", base, "--window", "600", "--json"])
    assert six.code == 0, six.err
    d = json.loads(six.out)
    for r in d["replicas"]:
        o = r["observed"]
        print(f"[history] {r['instance']:>16} {r['engine']:>6} {r['bottleneck']:>13}: usage {o['kv_usage']}, "
              f"running {o['running']}, queued {o['queued']}, gen {o['gen_tps']} tok/s, {o['samples']} samples "
              f"over {o['span_s']} s")
    f = d["fleet"]
    print(f"[history] 6 h: step {d['step_s']} s, elapsed {f['elapsed_s']} s (CPU {six.cpu_s:.2f} s, wall "
          f"{six.wall_s:.2f} s), peak RSS {six.max_rss_mib:.0f} MiB, {f['bytes_read']:,} bytes; 10 min: peak RSS "
          f"{ten.max_rss_mib:.0f} MiB, {json.loads(ten.out)['fleet']['bytes_read']:,} bytes")
    by = {r["instance"]: r for r in d["replicas"]}
    assert {k: r["bottleneck"] for k, r in by.items()} == {
        "10.0.0.1:8000": "kv-capacity", "10.0.0.2:8000": "client-bound", "10.0.0.3:30000": "kv-capacity"}
    assert d["step_s"] == pytest.approx(HOURS * 3600 / 599, abs=0.01)
    kv = by["10.0.0.1:8000"]["observed"]
    assert kv["samples"] >= 590 and kv["span_s"] >= HOURS * 3600 - 3 * d["step_s"]
    assert kv["queued"] == 20 and kv["gen_tps"] == pytest.approx(60, rel=1e-3)  # counters: exact over any step
    assert by["10.0.0.3:30000"]["observed"]["gen_tps"] == pytest.approx(2951, abs=15)
    assert by["10.0.0.2:8000"]["observed"]["kv_usage"] == 0.08
    assert six.cpu_s < 10  # the CLI's CPU clock; its elapsed time too when the machine is not overloaded
    if os.getloadavg()[0] <= 2 * len(os.sched_getaffinity(0)):
        assert f["elapsed_s"] < 10
    assert six.max_rss_mib < ten.max_rss_mib + 32  # 36x the window: the same points per series
