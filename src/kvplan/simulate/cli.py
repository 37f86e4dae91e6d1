"""``kvplan simulate`` and ``kvplan tune``: ``add_parsers(subparsers)`` registers both, ``run(args, command)`` runs.

    kvplan simulate --gpu h100 --requests 100000 --prompt-len 1000 --output-len 4000 --concurrency 150 -- <launch>
    kvplan simulate --workload requests.jsonl --calibrate server.log -- <launch>
    kvplan tune --calibrate server.log --requests 20000 ... -- <launch>

Exit codes: 0, 2 on bad input (KvplanError).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

EPILOG = """workload files:
  JSONL of requests, one object per line: {"prompt_len": 1000, "output_len": 4000} plus optional
  "max_tokens", "arrival" (seconds: replayed as a trace), "prefix_id" and "prefix_len" (a shared prefix);
  or the result file of `python -m sglang.bench_serving --output-file` / vLLM `benchmark_serving --save-result`
  (per-request lengths with --output-details / --save-detailed; its rate and max concurrency are replayed).
"""
TUNE_MAX_REQUESTS = 20_000  # tune simulates at most this many requests per candidate (steady state decides)


def _workload_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workload (a file, or generated)")
    g.add_argument("--workload", help="JSONL of requests, or a SGLang bench_serving / vLLM benchmark_serving result")
    g.add_argument("--requests", type=int, help="generated: number of requests")
    g.add_argument("--prompt-len", type=int, help="generated: mean prompt tokens")
    g.add_argument("--output-len", type=int, help="generated: mean output tokens")
    g.add_argument("--prompt-dist", default="fixed", help="fixed | uniform:S | range:R | lognormal:S | exp")
    g.add_argument("--output-dist", default="fixed", help="fixed | uniform:S | range:R | lognormal:S | exp")
    g.add_argument("--max-new-tokens", type=int, help="generated: the requests' max_new_tokens (default: output)")
    g.add_argument("--shared-prefix", type=int, default=0, help="generated: tokens of a shared prompt prefix")
    g.add_argument("--prefix-groups", type=int, default=1, help="generated: distinct shared prefixes")
    g.add_argument("--concurrency", type=int, help="closed-loop clients (or the cap on requests in flight)")
    g.add_argument("--rate", type=float, help="requests/s (Poisson; --burstiness sets a gamma shape)")
    g.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of inter-arrival times (1: Poisson)")
    g.add_argument("--seed", type=int, default=0, help="seed of generated lengths and arrivals")
    s = p.add_argument_group("step time and serving")
    s.add_argument("--calibrate", metavar="LOG", help="fit the step time to this server log's serving lines")
    s.add_argument("--mem-bw-gbps", type=float, help="GPU memory bandwidth, GB/s (default: the GPU catalog)")
    s.add_argument("--tflops", type=float, help="dense TFLOP/s of the compute dtype (default: the GPU catalog)")
    s.add_argument("--host-bw-gbps", type=float, help="host<->GPU bandwidth for HiCache, GB/s (default 63: PCIe 5 x16)")
    s.add_argument("--router", choices=("round-robin", "least-load"), default="round-robin",
                   help="how replicas share requests")


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    from kvplan.cli.main import _hardware_options

    sim = subparsers.add_parser(
        "simulate", help="what a launch does to a workload: tok/s, latencies, queueing: kvplan simulate ... -- <cmd>",
        description="Simulate the engine's scheduler (SGLang or vLLM V1) on a workload, with the KV pool, page size,\n"
        "chunked prefill, running cap, prefix cache and HiCache host tier of the launch as kvplan check plans it.\n"
        "Step times come from a roofline of the GPU (or --calibrate LOG). Put the launch command after --.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _hardware_options(sim)
    _workload_args(sim)
    sim.add_argument("--series", action="store_true", help="print running/queued over time")
    tun = subparsers.add_parser(
        "tune", help="search the launch levers check knows, simulate each: kvplan tune ... -- <cmd>",
        description="Rewrite the launch with each lever (static fraction, fp8 KV, DP attention, HiCache, max running "
        "requests, chunked prefill, CUDA-graph sizes, replicas), keep those kvplan check finds safe, simulate each on "
        "the workload and rank them by predicted throughput; the current launch first.")
    _hardware_options(tun)
    _workload_args(tun)
    tun.add_argument("--top", type=int, default=5, help="candidates to show (default 5)")


def workload_from(a: argparse.Namespace, cap: int | None = None):
    from kvplan.errors import KvplanError
    from kvplan.simulate.workload.files import load_file
    from kvplan.simulate.workload.generate import generated

    if a.workload:
        if a.requests or a.prompt_len or a.output_len:
            raise KvplanError("give either --workload FILE or --requests/--prompt-len/--output-len")
        return load_file(a.workload, a.concurrency, a.rate, a.burstiness, a.seed)
    if not (a.requests and a.prompt_len and a.output_len):
        raise KvplanError("no workload", "give --workload FILE, or --requests N --prompt-len P --output-len L "
                          "with --concurrency C and/or --rate R")
    n = min(a.requests, cap) if cap else a.requests
    return generated(n, a.prompt_len, a.output_len, a.concurrency, a.rate, a.burstiness, a.prompt_dist,
                     a.output_dist, a.max_new_tokens, a.shared_prefix, a.prefix_groups, a.seed)


def run(a: argparse.Namespace, command: Sequence[str] | None) -> int:
    from kvplan.cli.main import _opts
    from kvplan.errors import KvplanError
    from kvplan.simulate.session import prepare

    if not command:
        raise KvplanError(f"kvplan {a.cmd} needs the launch command after --",
                          "e.g. kvplan simulate --gpu h100 --requests 1000 --prompt-len 1000 --output-len 500 "
                          "--concurrency 32 -- python -m sglang.launch_server --model-path Qwen/Qwen3-8B")
    opts = {k: v for k, v in _opts(a).items() if v is not None and k != "avg_tokens"}
    if a.cmd == "tune":
        return _tune(a, command, opts)
    w = workload_from(a)
    ses = prepare(list(command), opts, a.calibrate, a.mem_bw_gbps, a.tflops)
    from kvplan.simulate.run import run_simulation

    res = run_simulation(ses.inputs, w, ses.model_for(ses.inputs), a.router, a.host_bw_gbps)
    note = ses.workload_check(res)
    if note:
        from dataclasses import replace

        res = replace(res, notes=(*res.notes, note))
    if a.json:
        d = res.to_dict()
        d["calibration"] = ses.fit.to_dict() if ses.fit else None
        print(json.dumps(d, indent=2))
    else:
        from kvplan.simulate.report import render_simulation

        render_simulation(res, ses.fit, series=a.series)
    return 0


def _tune(a: argparse.Namespace, command: Sequence[str], opts: dict) -> int:
    from kvplan.simulate.run import run_simulation
    from kvplan.simulate.session import prepare
    from kvplan.simulate.tune import tune

    w = workload_from(a, TUNE_MAX_REQUESTS)
    ses = prepare(list(command), opts, a.calibrate, a.mem_bw_gbps, a.tflops)

    def sim(inputs):
        return run_simulation(inputs, w, ses.model_for(inputs), a.router, a.host_bw_gbps)

    if a.json:
        res = tune(ses.inputs, sim)
        d = res.to_dict()
        d["calibration"] = ses.fit.to_dict(max_rows=0) if ses.fit else None
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
    render_tune(res, ses.fit, a.top)
    return 0
