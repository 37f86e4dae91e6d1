"""``kvplan plan --model M [--engine E] [--tp N ...]``: the same plan from plain options; the engine builds the launch
command the options describe (``Engine.plan_argv``) and turns the engine settings below into its own flags
(``Engine.plan_settings`` / ``plan_flags``). Each engine's settings are listed in ``--help`` with the engines that
take them; a setting the chosen engine has no flag for is an error (exit 2), never silently dropped."""

from __future__ import annotations

import argparse
from typing import Any


def _settings() -> dict[str, tuple[Any, str, list[str]]]:
    """key -> (type, help, display names of the engines that take it), over every registered engine."""
    from kvplan.engines import all_engines

    out: dict[str, tuple[Any, str, list[str]]] = {}
    for eng in all_engines():
        for s in eng.plan_settings():
            if s.key in out:
                out[s.key][2].append(eng.display_name)
            else:
                out[s.key] = (s.type, s.help, [eng.display_name])
    return out


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.exitcodes import PLAN_EXIT_CODES, HelpFormatter, exit_codes
    from kvplan.cli.options import add_plan_options, html_option, json_option
    from kvplan.engines import DEFAULT_ENGINE, ENGINES

    pl = sub.add_parser("plan", help="the same plan from plain options (no launch command)",
                        description="Plan a launch described by options instead of a command: the engine builds its "
                        "launch command (printed in the JSON as 'command') and kvplan checks it like kvplan check. "
                        "Figures are per rank, per node and per replica as in kvplan check.",
                        epilog=exit_codes(*PLAN_EXIT_CODES), formatter_class=HelpFormatter)
    g = add_plan_options(pl)
    json_option(g)
    html_option(g)
    m = pl.add_argument_group("launch")
    m.add_argument("--engine", choices=sorted(ENGINES), default=None,
                   help=f"engine to plan for (default: {DEFAULT_ENGINE}); kvplan check takes any engine's command")
    m.add_argument("--model", required=True, help="HF repo id, local checkpoint directory, or catalog alias "
                   "(kvplan models lists the catalog; nothing is downloaded)")
    m.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks per replica (GPUs sharing each layer)")
    m.add_argument("--dp", type=int, default=1, help="data-parallel replicas (or DP-attention groups with "
                   "--enable-dp-attention), each on --tp GPUs")
    m.add_argument("--pp", type=int, default=1, help="pipeline stages per replica, each on --tp GPUs")
    e = pl.add_argument_group("engine settings (each becomes the engine's flag of the same name)")
    for key, (typ, text, engines) in _settings().items():
        flag = "--" + key.replace("_", "-")
        where = f" [{', '.join(engines)}]"
        if typ is bool:
            e.add_argument(flag, action="store_true", default=None, help=text + where)
        else:
            e.add_argument(flag, type=typ, default=None, help=text + where)
    return pl


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser) -> int:
    from kvplan import api
    from kvplan.cli.check import emit
    from kvplan.cli.options import plan_options
    from kvplan.engines import DEFAULT_ENGINE, get_engine

    if command:
        parser.error("kvplan plan takes options, not a launch command (use kvplan check for that)")
    engine = a.engine or DEFAULT_ENGINE
    extra = get_engine(engine).plan_flags({k: getattr(a, k, None) for k in _settings()})
    return emit(api.plan(a.model, engine=engine, tp=a.tp, dp=a.dp, pp=a.pp, extra_args=extra, **plan_options(a)),
                a)
