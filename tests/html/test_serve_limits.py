"""``kvplan serve`` under slow and many clients (issue #22): connections that never finish their request head are
closed after the header timeout and do not count against the plans being made, one client address holds a bounded
number of connections, and a burst of requests queues for the planning slots instead of getting 503."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from kvplan.serve import limits
from tests.html.serve_helpers import request, running_server

BODY = {"command": "vllm serve Qwen/Qwen3-8B", "gpu": "h100", "host_mem_gib": 512}


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _slow(port: int, n: int) -> list[socket.socket]:
    """*n* connections that send the start of a request head and never finish it."""
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        out.append(s)
    return out


def _closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
    except TimeoutError:
        return False
    except OSError:
        return True


def test_defaults():
    assert limits.HEADER_TIMEOUT_S == 10.0 and limits.MAX_PER_CLIENT >= 150 and limits.MAX_PLANNING >= 1


def test_slow_headers_neither_block_requests_nor_stay():
    with running_server(header_timeout_s=1.5) as url:
        slow = _slow(_port(url), 150)  # the trial: 150 slow connections made every request 503 for 20 s
        try:
            t0 = time.monotonic()
            for _ in range(3):
                status, d, _ = request(url + "/api/plan", BODY)
                assert status == 200, d
            assert time.monotonic() - t0 < 30
            assert all(_closed_by_server(s, 5.0) for s in slow[:10])  # closed once their head is late
        finally:
            for s in slow:
                s.close()


def test_a_trickling_head_is_not_kept_alive_by_its_bytes():
    with running_server(header_timeout_s=1.0) as url:
        s = socket.create_connection(("127.0.0.1", _port(url)), timeout=10)
        stop = threading.Event()

        def trickle() -> None:
            for c in b"GET / HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                if stop.is_set():
                    return
                try:
                    s.send(bytes([c]))
                except OSError:
                    return
                time.sleep(0.1)

        t = threading.Thread(target=trickle, daemon=True)
        t0 = time.monotonic()
        t.start()
        try:
            assert _closed_by_server(s, 8.0)
            assert time.monotonic() - t0 < 6.0  # 1 s deadline (+ scheduling), though a byte came every 0.1 s
        finally:
            stop.set()
            s.close()


def test_keep_alive_connection_gets_a_new_deadline():
    with running_server(header_timeout_s=1.0) as url:
        s = socket.create_connection(("127.0.0.1", _port(url)), timeout=10)
        try:
            s.sendall(b"GET /assets/style.css HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = s.recv(65536)
            assert first.startswith(b"HTTP/1.1 200")
            assert _closed_by_server(s, 8.0)  # then idle: closed (uvicorn's keep-alive or the head deadline)
        finally:
            s.close()


def test_connections_per_client_are_bounded():
    with running_server(max_per_client=20) as url:
        conns = [socket.create_connection(("127.0.0.1", _port(url)), timeout=10) for _ in range(30)]
        try:
            time.sleep(0.5)
            refused = 0
            for s in conns[20:]:
                s.settimeout(5)
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                refused += data.startswith(b"HTTP/1.1 503") or data == b""
            assert refused == 10
        finally:
            for s in conns:
                s.close()
        time.sleep(0.3)
        assert request(url + "/api/plan", BODY)[0] == 200  # the bound frees with the connections


def test_a_burst_of_views_queues_instead_of_503():
    with running_server() as url:
        with ThreadPoolExecutor(50) as pool:
            got = list(pool.map(lambda _: request(url + "/api/view", BODY)[0], range(50)))
        assert got.count(200) == 50, got  # before: 36 x 503 (limit_concurrency=32 counted connections)
