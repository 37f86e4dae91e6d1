"""A real ``kvplan serve`` for tests: the app under uvicorn in a thread on 127.0.0.1 (a free port), and urllib."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def running_server(**limits: Any) -> Iterator[str]:
    """The app with the server's own uvicorn settings (kvplan.serve.limits.uvicorn_config; *limits* override its
    header timeout and per-client bound)."""
    import uvicorn

    from kvplan.serve.app import create_app
    from kvplan.serve.limits import uvicorn_config
    from kvplan.serve.server import bind

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn_config(create_app(), **limits))
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        t.join(timeout=10)
        sock.close()


def request(url: str, body: Any = None, raw: bytes | None = None, headers: dict[str, str] | None = None,
            method: str | None = None) -> tuple[int, Any, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Content-Type": "application/json"} if data is not None else {}
    h.update(headers or {})
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            status, payload, hdrs = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, payload, hdrs = e.code, e.read(), e.headers
    text = payload.decode()
    try:
        return status, json.loads(text), hdrs
    except json.JSONDecodeError:
        return status, text, hdrs
