"""``kvplan serve [--port N]``: the local planning page on 127.0.0.1 (only; other bind addresses are refused)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT_PORT = 8765
LOOPBACK = "127.0.0.1"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve", help="a local planning page with sliders (127.0.0.1 only): kvplan serve [--port 8765]",
        description="Serve a local page on 127.0.0.1 where you paste a launch command, pick the GPU and host memory, "
        "and move sliders (fraction, host KV size, HiCache ratio, TP/DP, fp8 KV, max running requests) to see the "
        "plan's charts redraw. POST /api/plan returns what kvplan check --json returns. Needs pip install "
        "'kvplan[serve]'.")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0 picks one)")
    p.add_argument("--host", default=LOOPBACK, help="bind address; only 127.0.0.1 is accepted")
    return p


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
    s.listen(64)
    return s


def run(args: argparse.Namespace) -> int:
    from kvplan.report.html.deps import require

    require("serve", "kvplan serve")
    sock = bind(args.host, args.port)
    import uvicorn

    from kvplan.serve.app import create_app

    port = sock.getsockname()[1]
    print(f"kvplan serve: http://{LOOPBACK}:{port}/ (Ctrl-C stops it)", flush=True)
    config = uvicorn.Config(create_app(), log_level="warning", access_log=False, limit_concurrency=32,
                            timeout_keep_alive=5, h11_max_incomplete_event_size=64 * 1024, lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    print("kvplan serve: stopped", file=sys.stderr)
    return 0
