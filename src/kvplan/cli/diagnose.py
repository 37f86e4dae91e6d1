"""``kvplan diagnose``: ``add_parser(subparsers)`` registers it, ``run(args, command)`` runs it.

    kvplan diagnose --log server.log [--window 300] [--gpu ...] [-- <launch command>]
    kvplan diagnose --url http://127.0.0.1:30000 --window 30 --launch-command "python -m sglang.launch_server ..."
    kvplan diagnose --prometheus http://127.0.0.1:9090 [--match 'job="vllm"'] [--window 300] [-f k8s/]

Exit codes (EXIT_CODES, shown by --help): 0 a diagnosis, whatever the bottleneck (``unknown`` included); 2 bad
usage, an unreadable log or deployment file, a --url that gives nothing (connection refused, timeout, HTTP status,
not an engine), or a --prometheus that gives no answer or no engine series.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

HELP = ("name a running server's bottleneck and price the levers: kvplan diagnose --log FILE | --url URL | "
        "--prometheus URL (every replica)")
EXIT_CODES = (
    (0, "a diagnosis was made, whatever the bottleneck (\"unknown\" included: too few samples says how many it had; "
        "--prometheus: every replica diagnosed)"),
    (2, "bad usage or option, an unreadable log or -f file, a --url that gives nothing: connection refused, timeout, "
        "an HTTP error status, or a server that is not SGLang or vLLM; a --prometheus that gives no answer (refused, "
        "timeout, HTTP status, unauthorized, not a Prometheus API) or no engine series (one line says which)"))


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
        "terminal (never with --json). --prometheus URL diagnoses every replica a Prometheus server holds (its launch "
        "from -f files or its metrics) and prints the fleet: replicas per bottleneck, the levers that help most.",
        epilog=exit_codes(*EXIT_CODES), formatter_class=HelpFormatter)
    p.add_argument("--url", help="the server, e.g. http://127.0.0.1:30000 (/metrics, /get_server_info, /v1/models)")
    p.add_argument("--log", help="the server's log (startup and serving-stats lines)")
    p.add_argument("--window", type=float, help="seconds: sample the URL this long (default 30), read the last "
                   "S seconds of the log (default 600), or of Prometheus' data (--prometheus; default 300)")
    p.add_argument("--launch-command", help="the launch command as one string (or put it after --)")
    f = p.add_argument_group("a fleet through Prometheus")
    f.add_argument("--prometheus", metavar="URL", help="diagnose every SGLang/vLLM replica this Prometheus server (or "
                   "Thanos, Mimir, VictoriaMetrics: its /api/v1) scrapes, over the last --window seconds (default "
                   "300); credentials from KVPLAN_PROMETHEUS_TOKEN or KVPLAN_PROMETHEUS_USER/PASSWORD only")
    f.add_argument("--match", metavar="SELECTOR", help="only the series these label matchers select, e.g. "
                   "'job=\"vllm\",namespace=~\"llm-.*\"'")
    f.add_argument("-f", "--file", action="append", metavar="FILE", default=None,
                   help="with --prometheus: deployment files (Kubernetes manifests, kubectl get -o yaml, compose, "
                   "scripts; a directory; - for stdin) whose launches the replicas run, matched by pod name or port")
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

    if args.prometheus:
        return _fleet(args, command)
    if args.file or args.match:
        raise KvplanError(f"{'-f' if args.file else '--match'} goes with --prometheus URL",
                          "kvplan diagnose --prometheus http://HOST:9090 -f k8s/")
    if not args.url and not args.log:
        raise KvplanError("kvplan diagnose needs --log FILE, --url URL or --prometheus URL")
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


def _fleet(args: argparse.Namespace, command: Sequence[str] | None) -> int:
    from kvplan.cli.options import plan_options
    from kvplan.diagnose.fleet.run import diagnose_fleet
    from kvplan.errors import KvplanError
    from kvplan.report.html import cli as html_cli

    if args.url or args.log or args.launch_command or command:
        raise KvplanError("--prometheus reads every replica: give it without --url, --log or a launch command",
                          "each replica's launch comes from -f FILE (matched by pod name or port) or its metrics")
    opts = plan_options(args)
    res = diagnose_fleet(args.prometheus, match=args.match, window_s=args.window, files=args.file,
                         **{k: v for k, v in opts.items() if v is not None})
    d = res.to_dict()
    html_cli.emit("fleet", args, d)
    if args.json:
        print(json.dumps(d, indent=2))
    else:
        from kvplan.diagnose.fleet.report import render

        render(d)
    return 0
