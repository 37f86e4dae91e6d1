"""``kvplan simulate [options] -- <launch command>``: what a launch does to a workload (tok/s, latencies, queueing),
from the engine's own scheduler. ``add_parser(subparsers)`` registers it, ``run(args, command, parser)`` runs it.

    kvplan simulate --gpu h100 --requests 100000 --prompt-len 1000 --output-len 4000 --concurrency 150 -- <launch>
    kvplan simulate --workload requests.jsonl --calibrate server.log -- <launch>

Exit codes: 0, 2 on bad input (KvplanError).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from kvplan.cli.exitcodes import HelpFormatter, exit_codes

EPILOG = """workload files:
  JSONL of requests, one object per line: {"prompt_len": 1000, "output_len": 4000} plus optional
  "max_tokens", "arrival" (seconds: replayed as a trace), "prefix_id" and "prefix_len" (a shared prefix);
  or the result file of `python -m sglang.bench_serving --output-file` / vLLM `benchmark_serving --save-result`
  (per-request lengths with --output-details / --save-detailed; its rate and max concurrency are replayed).
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.options import add_plan_options, add_workload_options, json_option

    p = sub.add_parser(
        "simulate", help="what a launch does to a workload: tok/s, latencies, queueing: kvplan simulate ... -- <cmd>",
        description="Simulate the engine's scheduler (SGLang or vLLM V1) on a workload, with the KV pool, page size,\n"
        "chunked prefill, running cap, prefix cache and HiCache host tier of the launch as kvplan check plans it.\n"
        "Step times come from a roofline of the GPU (or --calibrate LOG). Put the launch command after --.\n"
        "Exit codes: 0 a simulation, 2 bad usage or unreadable input.",
        epilog=exit_codes((0, "simulated (the report printed)"),
                          (2, "bad usage, an unreadable workload file, or a launch kvplan cannot plan"))
        + "\n\n" + EPILOG, formatter_class=HelpFormatter)
    g = add_plan_options(p, "hardware and inputs (as kvplan check)", skip=("avg_tokens",))
    json_option(g)
    add_workload_options(p)
    p.add_argument("--series", action="store_true", help="print running/queued over time")
    return p


def launch_options(args: argparse.Namespace, command: Sequence[str] | None) -> dict[str, Any]:
    """check's options as given; KvplanError without a launch command."""
    from kvplan.cli.options import plan_options
    from kvplan.errors import KvplanError

    if not command:
        raise KvplanError(f"kvplan {args.cmd} needs the launch command after --",
                          f"e.g. kvplan {args.cmd} --gpu h100 --requests 1000 --prompt-len 1000 --output-len 500 "
                          "--concurrency 32 -- <the engine's launch command>")
    return {k: v for k, v in plan_options(args).items() if v is not None and k != "avg_tokens"}


def log_workload(ses: Any, values: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """With --calibrate and no complete workload (no --workload, and not all of --requests/--prompt-len/--output-len),
    the workload the log shows fills in what is not given; returns (the values, the note saying what was inferred)."""
    if ses.anchor is None or values.get("workload") or all(values.get(k) for k in ("requests", "prompt_len",
                                                                                  "output_len")):
        return values, None
    lw = ses.inferred_workload()
    if lw is None:
        return values, None
    given = {k for k, v in values.items() if v is not None and k in lw.values()}
    out = {**values, **{k: v for k, v in lw.values().items() if values.get(k) is None}}
    return out, lw.note({f"--{k.replace('_', '-')}" for k in given})


def lockstep_note(w: Any) -> str | None:
    """A generated workload whose requests all have one output length and arrive together: the engine serves them in
    waves (they finish together, and the next ones are admitted together), which real workloads rarely do."""
    d = w.description or {}
    if d.get("kind") != "generated" or d.get("output_dist") != "fixed" or w.rate:
        return None
    return ("every request has the same output length and they start together: the engine runs them in lock-step "
            "waves (the simulator does too); a real workload's lengths vary: --output-dist uniform:0.5 (or the "
            "benchmark's --random-range-ratio as range:R) to simulate that")


def run(a: argparse.Namespace, command: Sequence[str] | None, parser: argparse.ArgumentParser | None = None) -> int:
    from dataclasses import replace

    from kvplan.cli.options import workload_values
    from kvplan.simulate.run import run_simulation
    from kvplan.simulate.session import band, prepare
    from kvplan.simulate.workload.options import workload_from

    opts = launch_options(a, command)
    ses = prepare(list(command or ()), opts, a.calibrate, a.mem_bw_gbps, a.tflops, a.calibrate_launch)
    values, inferred = log_workload(ses, workload_values(a))
    w = workload_from(values)
    res = run_simulation(ses.inputs, w, ses.model_for(ses.inputs), a.router, a.host_bw_gbps)
    alt = ses.alternative_for(ses.inputs)
    wide = band(res, run_simulation(ses.inputs, w, alt[1], a.router, a.host_bw_gbps), alt[0]) if alt else None
    more = tuple(n for n in (ses.check_note(), inferred, lockstep_note(w), *(ses.fit.notes if ses.fit else ()),
                             ses.workload_check(res), ses.coverage_check(res)) if n)
    if more:
        res = replace(res, notes=(*res.notes, *more))
    if a.json:
        d = res.to_dict()
        d["calibration"] = ses.calibration_dict()
        d["prediction_band"] = wide
        print(json.dumps(d, indent=2))
    else:
        from kvplan.simulate.report import render_simulation

        render_simulation(res, ses.fit, series=a.series, band=wide,
                          calibration_launch=ses.log_launch.to_dict() if ses.log_launch else None)
    return 0
