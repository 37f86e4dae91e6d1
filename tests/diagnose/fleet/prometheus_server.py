"""Debian's real ``prometheus`` started by a test: 127.0.0.1 only, a private config and data directory, stopped by
the pid it started (never the system service, never a name). Waits on states (``/-/ready``, a query's answer),
never on sleeps alone. Without the binary the tests skip, or fail when ``$CI`` is set (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.integration.vllm_engine import die_with_parent, free_port

PROMETHEUS, PROMTOOL = "/usr/bin/prometheus", "/usr/bin/promtool"


def require_prometheus() -> str:
    import pytest

    exe = shutil.which("prometheus") or PROMETHEUS
    if not Path(exe).exists():
        msg = "Debian's prometheus is not installed (apt-get install -y prometheus; .ci/run does it)"
        if (os.environ.get("CI") or "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail("CI is set, so the Prometheus tests must run: " + msg)
        pytest.skip(msg)
    return exe


def config(targets: list[tuple[str, dict[str, str]]], interval_s: float = 1.0, job: str = "engines") -> str:
    """A scrape config: one static target per (host:port, labels), every ``interval_s``."""
    lines = ["global:", f"  scrape_interval: {interval_s:g}s", f"  scrape_timeout: {interval_s:g}s",
             "scrape_configs:", f"  - job_name: {job}", "    static_configs:"]
    for addr, labels in targets:
        lines.append(f'      - targets: ["{addr}"]')
        if labels:
            lines.append("        labels: " + json.dumps(labels))
    return "\n".join(lines) + "\n"


def wait_until(what: str, check: Callable[[], Any], limit_s: float, every_s: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy (returned); AssertionError naming ``what`` past limit_s."""
    t0 = time.monotonic()
    last: Any = None
    while time.monotonic() - t0 < limit_s:
        try:
            last = check()
        except (OSError, urllib.error.URLError, ValueError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(every_s)
    raise AssertionError(f"{what}: not reached within {limit_s:.0f} s (last: {str(last)[:300]})")


def api(base: str, path: str, **params: str) -> Any:
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return doc["data"]


def scrapes(base: str, selector: str, how: str = "count", window_s: int = 120) -> dict[str, float]:
    """instance -> samples Prometheus holds of ``selector`` over the last ``window_s`` seconds (``how`` "instant":
    the value of the expression ``selector`` itself)."""
    q = selector if how == "instant" else f"count_over_time({selector}[{window_s}s])"
    res = api(base, "/api/v1/query", query=q)["result"]
    return {r["metric"].get("instance", ""): round(float(r["value"][1]), 3) for r in res}


@contextmanager
def prometheus(tmp: Path, cfg: str | None, data_dir: Path | None = None, extra: tuple[str, ...] = ()
               ) -> Iterator[str]:
    """Start prometheus on 127.0.0.1:<free port> with ``cfg`` (None: no scrape at all) and ``data_dir`` (default: a
    fresh one under tmp); yield its base URL; stop it (SIGTERM to its pid, SIGKILL after 30 s)."""
    exe = require_prometheus()
    port = free_port()
    conf = tmp / f"prometheus-{port}.yml"
    conf.write_text(cfg or "global:\n  scrape_interval: 1s\n")
    data = data_dir or tmp / f"prometheus-data-{port}"
    log = tmp / f"prometheus-{port}.log"
    argv = [exe, f"--config.file={conf}", f"--storage.tsdb.path={data}", f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=30d", "--log.level=warn", *extra]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=die_with_parent)
    base = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited {proc.returncode}: {log.read_text()[-2000:]}")
            with urllib.request.urlopen(base + "/-/ready", timeout=2) as r:
                return r.status == 200
        wait_until("prometheus /-/ready", ready, 90)
        yield base
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
