"""The hardware-and-inputs options every subcommand shares, derived from kvplan.options.PlanOptions: one flag per
field (``--gpu-mem-mib`` for ``gpu_mem_mib``), its type from the annotation, its default and help from the field."""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Collection, Mapping
from dataclasses import MISSING, fields
from typing import Any, cast

from kvplan.options import PlanOptions


def _type(annotation: Any) -> type:
    """``int | None`` -> int."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return cast(type, next(a for a in typing.get_args(annotation) if a is not type(None)))
    return cast(type, annotation)


def add_plan_options(parser: argparse.ArgumentParser, title: str = "hardware and inputs",
                     defaults: Mapping[str, Any] | None = None, helps: Mapping[str, str] | None = None,
                     skip: Collection[str] = ()) -> argparse._ArgumentGroup:
    """Add one option per PlanOptions field (``defaults``/``helps`` replace a field's own; ``skip`` leaves fields
    out); returns the group, for the subcommand's own options."""
    hints = typing.get_type_hints(PlanOptions)
    g = parser.add_argument_group(title)
    for f in fields(PlanOptions):
        if f.name in skip:
            continue
        default = (defaults or {}).get(f.name, None if f.default is MISSING else f.default)
        g.add_argument("--" + f.name.replace("_", "-"), type=_type(hints[f.name]), default=default,
                       help=(helps or {}).get(f.name, f.metadata.get("help")))
    return g


def plan_options(args: argparse.Namespace) -> dict[str, Any]:
    """The PlanOptions fields the command line gave (None: not given)."""
    return {f.name: getattr(args, f.name) for f in fields(PlanOptions) if hasattr(args, f.name)}


def json_option(group: argparse._ArgumentGroup | argparse.ArgumentParser,
                help: str = "print one JSON object (stable schema)") -> None:  # noqa: A002 - argparse's name
    group.add_argument("--json", action="store_true", help=help)


def html_option(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    """``--html FILE``: also write the self-contained HTML report (kvplan.report.html)."""
    from kvplan.report.html.cli import add_html_option

    add_html_option(group)
