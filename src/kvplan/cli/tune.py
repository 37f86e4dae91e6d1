"""``kvplan tune [options] -- <launch command>``: the launch levers ``check`` knows, each kept only where ``check``
finds it safe, simulated on the workload and ranked by predicted throughput, the current launch first.
``add_parser(subparsers)`` registers it, ``run(args, command, parser)`` runs it.

    kvplan tune --calibrate server.log --requests 20000 --prompt-len 1000 --output-len 4000 --concurrency 150 -- <cmd>

Exit codes: 0, 2 on bad input (KvplanError).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from kvplan.cli.exitcodes import HelpFormatter, exit_codes

TUNE_MAX_REQUESTS = 20_000  # tune simulates at most this many requests per candidate (steady state decides)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.options import add_plan_options, add_workload_options, json_option

    p = sub.add_parser(
        "tune", help="search the launch levers check knows, simulate each: kvplan tune ... -- <cmd>",
        description="Rewrite the launch with each lever (static fraction, fp8 KV, DP attention, HiCache, max running "
        "requests, chunked prefill, CUDA-graph sizes, replicas), keep those kvplan check finds safe, simulate each on "
        "the workload and rank them by predicted throughput; the current launch first.",
        epilog=exit_codes((0, "candidates simulated and ranked (the current launch first)"),
                          (2, "bad usage, an unreadable workload file, or a launch kvplan cannot plan")),
        formatter_class=HelpFormatter)
    g = add_plan_options(p, "hardware and inputs (as kvplan check)", skip=("avg_tokens",))
    json_option(g)
    add_workload_options(p)
    p.add_argument("--top", type=int, default=5, help="candidates to show (default 5)")
    return p


def run(a: argparse.Namespace, command: Sequence[str] | None, parser: argparse.ArgumentParser | None = None) -> int:
    from dataclasses import replace

    from kvplan.cli.options import workload_values
    from kvplan.cli.simulate import launch_options, log_workload
    from kvplan.simulate.launch import LaunchInputs
    from kvplan.simulate.result import SimResult
    from kvplan.simulate.run import run_simulation
    from kvplan.simulate.session import prepare
    from kvplan.simulate.tune import tune
    from kvplan.simulate.workload.options import workload_from

    opts = launch_options(a, command)
    ses = prepare(list(command or ()), opts, a.calibrate, a.mem_bw_gbps, a.tflops, a.calibrate_launch)
    values, inferred = log_workload(ses, workload_values(a))
    w = workload_from(values, TUNE_MAX_REQUESTS)

    def sim(inputs: LaunchInputs) -> SimResult:
        return run_simulation(inputs, w, ses.model_for(inputs), a.router, a.host_bw_gbps)

    more = (*((inferred,) if inferred else ()), *(ses.fit.notes if ses.fit else ()))
    if a.json:
        res = tune(ses.inputs, sim)
        if more:
            res = replace(res, notes=(*more, *res.notes))
        d = res.to_dict()
        d["calibration"] = ses.calibration_dict(max_rows=0)
        print(json.dumps(d, indent=2))
        return 0
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    from kvplan.simulate.report import render_tune

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("current launch", total=None)

        def tick(name: str, total: int) -> None:
            bar.update(task, description=name, total=total, advance=1)

        res = tune(ses.inputs, sim, tick)
    if more:
        res = replace(res, notes=(*more, *res.notes))
    render_tune(res, ses.fit, a.top)
    return 0
