"""``kvplan plan --model M [--tp N ...]``: the same plan from plain options; the engine builds the launch command
the options describe (``Engine.plan_argv`` and its flags for the settings below)."""

from __future__ import annotations

import argparse

SETTINGS = ("mem_fraction_static", "kv_cache_dtype", "context_length", "max_running_requests", "page_size",
            "hicache_size", "hicache_ratio", "enable_dp_attention")  # launch flags of the same names


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.options import add_plan_options, html_option, json_option

    pl = sub.add_parser("plan", help="the same plan from plain options (no launch command)")
    g = add_plan_options(pl)
    json_option(g)
    html_option(g)
    pl.add_argument("--engine", help="engine (default: sglang; kvplan check takes any engine's command)")
    pl.add_argument("--model", required=True, help="HF repo id, local checkpoint, or catalog alias")
    pl.add_argument("--tp", type=int, default=1)
    pl.add_argument("--dp", type=int, default=1)
    pl.add_argument("--pp", type=int, default=1)
    pl.add_argument("--enable-dp-attention", action="store_true")
    pl.add_argument("--mem-fraction-static", type=float)
    pl.add_argument("--kv-cache-dtype")
    pl.add_argument("--context-length", type=int)
    pl.add_argument("--max-running-requests", type=int)
    pl.add_argument("--page-size", type=int)
    pl.add_argument("--hicache-size", type=float, help="decimal GB per rank (enables HiCache)")
    pl.add_argument("--hicache-ratio", type=float, help="host/device token ratio (enables HiCache)")
    return pl


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser) -> int:
    from kvplan import api
    from kvplan.cli.check import emit
    from kvplan.cli.options import plan_options
    from kvplan.engines import DEFAULT_ENGINE, get_engine

    if command:
        parser.error("kvplan plan takes options, not a launch command (use kvplan check for that)")
    engine = a.engine or DEFAULT_ENGINE
    extra = get_engine(engine).plan_flags({k: getattr(a, k) for k in SETTINGS})
    return emit(api.plan(a.model, engine=engine, tp=a.tp, dp=a.dp, pp=a.pp, extra_args=extra, **plan_options(a)),
                a)
