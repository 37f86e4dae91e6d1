"""``kvplan check [options] -- <launch command>``: plan a real launch command and report findings; ``--example``
checks the built-in example (the Kimi-K2.5 HiCache incident)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.result import CheckResult

# The incident (../shared/seeds): Kimi-K2.5, TP8, --hicache-size 300 (decimal GB per rank) on a 449 GiB host.
INCIDENT = ["python", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
            "--mem-fraction-static", "0.93", "--enable-hierarchical-cache", "--hicache-size", "300",
            "--hicache-write-policy", "write_through", "--hicache-io-backend", "kernel", "--trust-remote-code"]
INCIDENT_OPTS = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "host_mem_gib": 449.0,
                 "engine_version": "0.5.9"}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.exitcodes import PLAN_EXIT_CODES, HelpFormatter, exit_codes
    from kvplan.cli.options import add_plan_options, html_option, json_option

    c = sub.add_parser("check", help="preflight a real launch command: kvplan check [options] -- <command>",
                       description="Plan a launch command and report findings. Put the command after --.",
                       epilog=exit_codes(*PLAN_EXIT_CODES), formatter_class=HelpFormatter)
    g = add_plan_options(c)
    json_option(g)
    html_option(g)
    c.add_argument("--example", action="store_true",
                   help="check the built-in example (the Kimi-K2.5 HiCache incident: TP8, 300 GB per rank)")
    c.add_argument("-f", "--file", action="append", metavar="FILE", default=None,
                   help="a deployment to check: Kubernetes YAML (also multi-document, helm template output), Compose "
                        "file, Dockerfile, sbatch script or docker run line; a directory; - for stdin (repeatable)")
    return c


def emit(result: CheckResult, a: argparse.Namespace) -> int:
    """Write the HTML report when --html was given, print the result (JSON or the Rich report) and return its exit
    code."""
    from kvplan.report.html import cli as html_cli

    html_cli.emit(a.cmd, a, result.to_dict())
    try:
        if a.json:
            print(json.dumps(result.to_dict(), indent=2), flush=True)
        else:
            from kvplan.report.human import render

            cmd = getattr(a, "cmd", "check")
            render(result, title=f"kvplan {cmd}", command_label="built" if cmd == "plan" else "checked")
    except BrokenPipeError:  # `kvplan check ... | head`: the reader left; the verdict stands, the pipe is no error
        from kvplan.report.console import quiet_stdout

        quiet_stdout()
    return result.exit_code


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser) -> int:
    from kvplan import api
    from kvplan.cli.options import plan_options

    opts = plan_options(a)
    if a.file:
        if command or a.example:
            parser.error("-f FILE takes no launch command and no --example")
        from kvplan.cli.deploy import run_files

        return run_files(a, opts)
    if a.example:
        if command:
            parser.error("--example takes no launch command")
        command = INCIDENT
        opts.update({k: v for k, v in INCIDENT_OPTS.items() if opts.get(k) is None})
    if not command:
        parser.error("give the launch command after --, e.g. kvplan check --gpu h100 -- python -m "
                     "sglang.launch_server --model-path Qwen/Qwen3-8B (or try --example)")
    return emit(api.check(command, **opts), a)
