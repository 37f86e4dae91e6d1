"""``kvplan explain LOG [options] [-- launch command]``: reconcile a real startup log with the plan."""

from __future__ import annotations

import argparse
import json

EXIT_CODES = (
    (0, "the launch was planned and compared with the log (findings and differences are reported, not a failure)"),
    (2, "nothing could be planned (one line names the figure the log lacks and the option that supplies it), or the "
        "log is unreadable or not an engine's log, or an option is bad"))


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.exitcodes import HelpFormatter, exit_codes
    from kvplan.cli.options import add_plan_options, html_option, json_option

    ex = sub.add_parser("explain", help="reconcile a real startup log with the plan: kvplan explain LOG [-- command]",
                        description="Read an SGLang or vLLM startup log, rebuild the launch, and show, rank by rank, "
                        "what the log says next to what kvplan computes. The command after -- fills in flags the log "
                        "does not show. Without --gpu the GPU comes from the log's own memory figures; a figure the "
                        "log lacks is named with the option that supplies it.",
                        epilog=exit_codes(*EXIT_CODES), formatter_class=HelpFormatter)
    ex.add_argument("log", help="the engine's startup log")
    g = add_plan_options(ex)
    json_option(g)
    html_option(g)
    return ex


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser) -> int:
    from kvplan.cli.options import plan_options
    from kvplan.explain import explain
    from kvplan.report.html import cli as html_cli

    opts = {k: v for k, v in plan_options(a).items() if v is not None}
    # a log's host is not this machine: its memory stays unknown unless --host-mem-gib gives it (host-tier findings
    # then say what they could not check, as `check` does for other hardware)
    res = explain(a.log, command or None, **opts)
    html_cli.emit("explain", a, res.to_dict())
    if a.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        from kvplan.report.explain import render_explain

        render_explain(res)
    if res.check is None:
        import sys

        print(f"kvplan: error: {res.unsupported}", file=sys.stderr)
    return res.exit_code
