"""The ``--html FILE`` option, shared by check, plan, explain and diagnose (and simulate when it exists).

    add_html_option(parser_or_group)      registers --html FILE
    precheck(args)                        one-line error before any work when jinja2 is missing
    emit(kind, args, data)                writes the report when --html was given (data: the command's JSON dict)
"""

from __future__ import annotations

import argparse
from typing import Any

HELP = ("also write a self-contained HTML report (charts of every rank's GPU and every node's host memory, the "
        "findings, the suggested command) to FILE")


def add_html_option(p: Any) -> None:
    p.add_argument("--html", metavar="FILE", help=HELP)


def precheck(args: argparse.Namespace) -> None:
    """Before any work: jinja2 installed, and FILE a path kvplan may write (validate.output_file)."""
    from kvplan.report.html import check_html_deps

    path = getattr(args, "html", None)
    check_html_deps(path)
    if path:
        from kvplan import validate

        validate.output_file("--html", path, hint="pass a writable --html FILE")


def emit(kind: str, args: argparse.Namespace, data: dict[str, Any]) -> None:
    path = getattr(args, "html", None)
    if path:
        from kvplan.report.html import write_html

        write_html(kind, data, path)
