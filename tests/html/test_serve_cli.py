"""``kvplan serve`` as a user starts it: it prints its URL, answers there, and listens on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil

from tests.conftest import INCIDENT_CMD, run_cli
from tests.html.serve_helpers import request
from tests.waits import readline


def test_serve_answers_on_loopback_only():
    p = subprocess.Popen([sys.executable, "-m", "kvplan", "serve", "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = readline(p.stdout, 120)
        assert line.startswith("kvplan serve: http://127.0.0.1:"), line
        url = line.split()[2].rstrip("/")
        port = int(url.rsplit(":", 1)[1])
        deadline = time.monotonic() + 30
        while True:
            try:
                status, page, _ = request(url + "/")
                break
            except OSError:
                assert time.monotonic() < deadline, "no answer"
                time.sleep(0.1)
        assert status == 200 and "kvplan · plan a launch" in page
        listening = [c.laddr for c in psutil.Process(p.pid).net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and all(a.ip == "127.0.0.1" and a.port == port for a in listening), listening
        status, d, _ = request(url + "/api/plan", {"command": " ".join(INCIDENT_CMD), "gpu": "rtx-pro-6000",
                                                   "host_mem_gib": 449, "engine_version": "0.5.9"})
        assert status == 200 and d["verdict"] == "fail"
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 0


def test_port_in_use_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        code, out, err = run_cli(["serve", "--port", str(port)])
    assert code == 2 and out == "" and err.strip() == (f"kvplan: error: cannot listen on 127.0.0.1:{port}: Address "
                                                       "already in use (pass another --port)")


def test_missing_serve_extra_is_one_line():
    code = ("import sys; sys.modules['starlette'] = None\n"
            "from kvplan.cli.main import main\nsys.exit(main(['serve', '--port', '0']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and p.stderr.strip() == ("kvplan: error: kvplan serve needs starlette, which is not "
                                                      "installed (pip install 'starlette' (kvplan installs it by "
                                                      "default))")
    assert json.dumps(p.stdout) == '""'
