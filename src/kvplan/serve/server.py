"""The HTTP server behind ``kvplan serve`` (kvplan.cli.serve): uvicorn on a socket bound to 127.0.0.1 only."""

from __future__ import annotations

import sys
from typing import Any

LOOPBACK = "127.0.0.1"


def bind(host: str, port: int) -> Any:
    """A listening TCP socket on 127.0.0.1:port (socket.socket), or a one-line KvplanError."""
    import socket

    from kvplan.errors import KvplanError

    if host != LOOPBACK:
        raise KvplanError(f"kvplan serve binds {LOOPBACK} only, not {host!r}",
                          "the page plans from pasted input and has no login; reach it from elsewhere over an SSH "
                          "tunnel: ssh -L 8765:127.0.0.1:8765 HOST")
    if not 0 <= port <= 65535:
        raise KvplanError(f"--port {port} is not a TCP port", "use 1-65535, or 0 to pick a free one")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((LOOPBACK, port))
    except OSError as e:
        s.close()
        raise KvplanError(f"cannot listen on {LOOPBACK}:{port}: {e.strerror}", "pass another --port") from None
    s.listen(256)
    return s


def run(host: str, port: int) -> int:
    """Serve the planning page until Ctrl-C (starlette and uvicorn: a one-line KvplanError naming the one missing)."""
    from kvplan.report.html.deps import require

    require("serve", "kvplan serve")
    sock = bind(host, port)
    import uvicorn

    from kvplan.serve.app import create_app
    from kvplan.serve.limits import uvicorn_config

    port = sock.getsockname()[1]
    print(f"kvplan serve: http://{LOOPBACK}:{port}/ (Ctrl-C stops it)", flush=True)
    config = uvicorn_config(create_app())
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    print("kvplan serve: stopped", file=sys.stderr)
    return 0
