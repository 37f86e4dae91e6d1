"""``kvplan serve [--port N]``: the local planning page on 127.0.0.1 (only; other bind addresses are refused)."""

from __future__ import annotations

import argparse

from kvplan.serve.server import LOOPBACK

DEFAULT_PORT = 8765


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.exitcodes import HelpFormatter, exit_codes
    p = sub.add_parser(
        "serve", help="a local planning page with sliders (127.0.0.1 only): kvplan serve [--port 8765]",
        description="Serve a local page on 127.0.0.1 where you paste a launch command, pick the GPU and host memory, "
        "and move sliders (fraction, host KV size, HiCache ratio, TP/DP, fp8 KV, max running requests) to see the "
        "plan's charts redraw. POST /api/plan returns what kvplan check --json returns.",
        epilog=exit_codes((0, "the server stopped (Ctrl-C)"), (2, "another bind address than "
        "127.0.0.1, a port in use or a bad option, or starlette/uvicorn missing (one line says which)"),
                           (130, "the output pipe closed")),
        formatter_class=HelpFormatter)
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0 picks one)")
    p.add_argument("--host", default=LOOPBACK, help="bind address; only 127.0.0.1 is accepted")
    return p


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser) -> int:
    from kvplan.serve.server import run as run_server

    return run_server(a.host, a.port)
