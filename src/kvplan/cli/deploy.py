"""``kvplan check -f FILE``: check the engine containers of deployment files (kvplan.deploy), each named like
``Deployment/sglang-kimi, container server (file)``. JSON: ``{"schema_version", "deployments": [...], "verdict"}``
with one entry per container; exit 2 when a file is unreadable or holds no engine launch (one line naming it) or a
container cannot be planned, 1 on an error finding, else 0. ``--html FILE`` writes each planned container's report:
FILE itself for one, ``FILE-stem-<n>-<container>.html`` beside it for several."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any


def run_files(a: argparse.Namespace, opts: dict[str, Any]) -> int:
    from kvplan.deploy.check import check_containers
    from kvplan.deploy.loader import read_deployments

    result = check_containers(read_deployments(list(a.file)), opts)
    if getattr(a, "html", None):
        write_reports(a.html, result)
    try:
        if a.json:
            print(json.dumps(result.to_dict(), indent=2), flush=True)
            return _errors(result)
        from kvplan.report.console import console as make_console
        from kvplan.report.human import render

        console = make_console()
        for item in result.items:
            console.rule(f"[bold]{item.container.label}[/]")
            for note in (*item.container.notes, *item.assumptions):
                console.print(f"[dim]note: {note}[/]")
            if item.result is None:
                console.print(f"[red]cannot plan this container: {item.error}[/]")
            else:
                render(item.result, console)
        console.print(f"[bold]deployments: {len(result.items)} container(s), verdict {result.verdict}[/]")
    except BrokenPipeError:  # `kvplan check -f ... | head`: the verdict stands, the closed pipe is no error
        from kvplan.report.console import quiet_stdout

        quiet_stdout()
    return _errors(result)


def _errors(result: Any) -> int:
    """The exit code; each container that could not be planned (exit 2) also gets its one line on stderr."""
    for item in result.items:
        if item.error:
            print(f"kvplan: error: {item.container.label}: {item.error}", file=sys.stderr)
    return int(result.exit_code)


def report_paths(path: str, labels: list[str]) -> list[Path]:
    """One HTML file per planned container: ``path`` itself for one, else ``<stem>-<n>-<label>.html`` beside it
    (the label reduced to letters, digits and dashes, at most 60 characters)."""
    p = Path(os.path.expanduser(path))
    if len(labels) == 1:
        return [p]
    out = []
    for i, label in enumerate(labels, 1):
        slug = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")[:60] or "container"
        out.append(p.with_name(f"{p.stem}-{i}-{slug}{p.suffix or '.html'}"))
    return out


def write_reports(path: str, result: Any) -> None:
    from kvplan.report.html import write_html

    planned = [it for it in result.items if it.result is not None]
    if not planned:
        print("kvplan: --html: no container could be planned, no report written", file=sys.stderr)
        return
    for item, target in zip(planned, report_paths(path, [it.container.label for it in planned]), strict=True):
        write_html("check", item.result.to_dict(), target)
