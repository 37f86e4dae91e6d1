"""``kvplan check -f FILE``: check the engine containers of deployment files (kvplan.deploy), each named like
``Deployment/sglang-kimi, container server (file)``. JSON: ``{"schema_version", "deployments": [...], "verdict"}``
with one entry per container; exit 2 when a file is unreadable or holds no engine launch (one line naming it) or a
container cannot be planned, 1 on an error finding, else 0."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def run_files(a: argparse.Namespace, opts: dict[str, Any]) -> int:
    from kvplan.deploy.check import check_containers
    from kvplan.deploy.loader import read_deployments

    result = check_containers(read_deployments(list(a.file)), opts)
    if getattr(a, "html", None):
        print("kvplan: --html draws one launch; with -f it is not written", file=sys.stderr)
    if a.json:
        print(json.dumps(result.to_dict(), indent=2))
        return result.exit_code
    from rich.console import Console

    from kvplan.report.human import render

    console = Console()
    for item in result.items:
        console.rule(f"[bold]{item.container.label}[/]")
        for note in (*item.container.notes, *item.assumptions):
            console.print(f"[dim]note: {note}[/]")
        if item.result is None:
            console.print(f"[red]cannot plan this container: {item.error}[/]")
        else:
            render(item.result, console)
    console.print(f"[bold]deployments: {len(result.items)} container(s), verdict {result.verdict}[/]")
    return result.exit_code
