"""``kvplan diagnose``: ``add_parser(subparsers)`` registers it, ``run(args, command)`` runs it.

    kvplan diagnose --log server.log [--window 300] [--gpu ...] [-- <launch command>]
    kvplan diagnose --url http://127.0.0.1:30000 --window 30 --launch-command "python -m sglang.launch_server ..."

Exit codes (EXIT_CODES, shown by --help): 0 a diagnosis, whatever the bottleneck (``unknown`` included); 2 bad
usage, an unreadable log, or a --url that gives nothing (connection refused, timeout, HTTP status, not an engine).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

HELP = "name a running server's bottleneck and price the levers: kvplan diagnose --log FILE | --url URL"
EXIT_CODES = (
    (0, "a diagnosis was made, whatever the bottleneck (\"unknown\" included: too few samples says how many it had)"),
    (2, "bad usage or option, an unreadable log, or a --url that gives nothing: connection refused, timeout, an HTTP "
        "error status, or a server that is not SGLang or vLLM (one line says which)"))


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.exitcodes import HelpFormatter, exit_codes
    from kvplan.cli.options import add_plan_options, html_option, json_option

    p = subparsers.add_parser(
        "diagnose", help=HELP,
        description="Read a running SGLang or vLLM server (its log and/or its HTTP endpoints) over a window, name "
        "the bottleneck (kv-capacity, client-bound, compute-bound, prefix-miss, host-tier, running-cap, unknown) "
        "with the evidence, and price each lever in the server's own numbers. The launch command (after -- or "
        "--launch-command) makes the fixed commands; without it they come from the log when it shows the flags. "
        "Without --gpu the GPU comes from the log's memory figures. A progress bar shows the sampling on a "
        "terminal (never with --json).", epilog=exit_codes(*EXIT_CODES), formatter_class=HelpFormatter)
    p.add_argument("--url", help="the server, e.g. http://127.0.0.1:30000 (/metrics, /get_server_info, /v1/models)")
    p.add_argument("--log", help="the server's log (startup and serving-stats lines)")
    p.add_argument("--window", type=float, help="seconds: sample the URL this long (default 30), or read the last "
                   "S seconds of the log (default 600)")
    p.add_argument("--launch-command", help="the launch command as one string (or put it after --)")
    add_plan_options(p, "hardware and inputs (as kvplan check)", defaults={"avg_tokens": None}, helps={
        "engine_version": "engine version (default: the log's, else the installed/newest)",
        "avg_tokens": "tokens per request for 'requests that fit' (default: the in-flight size observed)",
        "free_gib": "free GPU memory per rank before weights (default: the log's)"})
    json_option(p, "print one JSON object")
    html_option(p)
    return p


def run(args: argparse.Namespace, command: Sequence[str] | None = None,
        parser: argparse.ArgumentParser | None = None) -> int:
    from kvplan.cli.options import plan_options
    from kvplan.diagnose.run import diagnose
    from kvplan.errors import KvplanError
    from kvplan.report.html import cli as html_cli

    if not args.url and not args.log:
        raise KvplanError("kvplan diagnose needs --log FILE and/or --url URL")
    if args.launch_command and command:
        raise KvplanError("give the launch command once: --launch-command or after --")
    from kvplan.engines.cmdline import tokenize

    cmd = tokenize(args.launch_command) if args.launch_command else (list(command) if command else None)
    from kvplan.cli.progress import sampling_bar, wanted
    from kvplan.diagnose.run import URL_WINDOW_S

    opts = plan_options(args)
    with sampling_bar(args.window or URL_WINDOW_S, bool(args.url) and wanted(args.json)) as update:
        from kvplan.cli.main import STARTED

        res = diagnose(url=args.url, log=args.log, window_s=args.window, launch_command=cmd, progress=update,
                       started_at=STARTED, **{k: v for k, v in opts.items() if v is not None})
    html_cli.emit("diagnose", args, res.to_dict())
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        from kvplan.diagnose.report import render

        render(res)
    return 0
