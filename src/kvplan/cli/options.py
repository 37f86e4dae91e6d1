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
        if f.name in skip or f.metadata.get("cli") is False:
            continue
        default = (defaults or {}).get(f.name, None if f.default is MISSING else f.default)
        if _type(hints[f.name]) is bool:  # a switch: --local-host
            g.add_argument("--" + f.name.replace("_", "-"), action="store_true", default=bool(default),
                           help=(helps or {}).get(f.name, f.metadata.get("help")))
            continue
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


def add_workload_options(parser: argparse.ArgumentParser) -> None:
    """The workload and step-time options of ``kvplan simulate`` and ``kvplan tune`` (kvplan.simulate reads them:
    ``workload_values`` / ``simulate.workload.options.workload_from``)."""
    g = parser.add_argument_group("workload (a file, or generated)")
    g.add_argument("--workload", help="JSONL of requests, or a SGLang bench_serving / vLLM benchmark_serving result")
    g.add_argument("--requests", type=int, help="generated: number of requests (default: 10 per client of "
                   "--concurrency, at least 100; 1,000 at --rate alone)")
    g.add_argument("--prompt-len", type=int, help="generated: mean prompt tokens")
    g.add_argument("--output-len", type=int, help="generated: mean output tokens")
    g.add_argument("--prompt-dist", help="fixed (default) | uniform:S | range:R | lognormal:S | exp")
    g.add_argument("--output-dist", help="fixed (default) | uniform:S | range:R | lognormal:S | exp")
    g.add_argument("--max-new-tokens", type=int, help="generated: the requests' max_new_tokens (default: output)")
    g.add_argument("--shared-prefix", type=int, default=0, help="generated: tokens of a shared prompt prefix")
    g.add_argument("--prefix-groups", type=int, default=1, help="generated: distinct shared prefixes")
    g.add_argument("--concurrency", type=int, help="closed-loop clients (or the cap on requests in flight)")
    g.add_argument("--rate", type=float, help="requests/s (Poisson; --burstiness sets a gamma shape)")
    g.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of inter-arrival times (1: Poisson)")
    g.add_argument("--seed", type=int, default=0, help="seed of generated lengths and arrivals")
    s = parser.add_argument_group("step time and serving")
    s.add_argument("--calibrate", metavar="LOG", help="fit the step time to this server log's serving lines")
    s.add_argument("--calibrate-launch", metavar="COMMAND",
                   help="the launch the --calibrate log came from, as one quoted command (default: as the log shows "
                   "it); its pool reads the log's lines, never the simulated launch's")
    s.add_argument("--mem-bw-gbps", type=float, help="GPU memory bandwidth, GB/s (default: the GPU catalog)")
    s.add_argument("--tflops", type=float, help="dense TFLOP/s of the compute dtype (default: the GPU catalog)")
    s.add_argument("--host-bw-gbps", type=float, help="host<->GPU bandwidth for HiCache, GB/s (default 63: PCIe 5 x16)")
    s.add_argument("--router", choices=("round-robin", "least-load"), default="round-robin",
                   help="how replicas share requests")


def workload_values(args: argparse.Namespace) -> dict[str, Any]:
    """What ``add_workload_options`` declared, by field name (None: not given)."""
    names = ("workload", "requests", "prompt_len", "output_len", "prompt_dist", "output_dist", "max_new_tokens",
             "shared_prefix", "prefix_groups", "concurrency", "rate", "burstiness", "seed")
    return {n: getattr(args, n, None) for n in names}
