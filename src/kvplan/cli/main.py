"""``kvplan`` command line. argparse only (fast start); heavy modules load inside the command.

Exit codes: 0 ok (warnings allowed), 1 an error finding, 2 bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

INCIDENT = ["python", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
            "--mem-fraction-static", "0.93", "--enable-hierarchical-cache", "--hicache-size", "300",
            "--hicache-write-policy", "write_through", "--hicache-io-backend", "kernel", "--trust-remote-code"]
INCIDENT_OPTS = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "host_mem_gib": 449.0,
                 "engine_version": "0.5.9"}


def _hardware_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("hardware and inputs")
    g.add_argument("--gpu", help="GPU name as nvidia-smi prints it, or an alias (h100, rtx-pro-6000, ...)")
    g.add_argument("--gpu-mem-mib", type=int, help="GPU memory.total in MiB, for GPUs not in the catalog")
    g.add_argument("--gpus-per-node", type=int, help="GPUs per node (default: ranks of the launch, up to 8)")
    g.add_argument("--nodes", type=int, default=1, help="nodes of the launch (default 1)")
    g.add_argument("--host-mem-gib", type=float,
                   help="host memory available to the engine per node, GiB (default: MemAvailable here)")
    g.add_argument("--engine-version", help="engine version (default: installed one, else newest known)")
    g.add_argument("--model-config", help="config.json or checkpoint directory (else local HF cache or catalog)")
    g.add_argument("--weights-gib", type=float, help="weights per rank in GiB (overrides the checkpoint size)")
    g.add_argument("--free-gib", type=float,
                   help="free GPU memory per rank before weights load, GiB (e.g. from a log's 'Load weight begin')")
    g.add_argument("--kv-memory-gib", type=float,
                   help="vLLM: KV memory per rank as a startup log printed it ('Available KV cache memory: X GiB')")
    g.add_argument("--avg-tokens", type=int, default=4096, help="tokens per request (prompt+output), default 4096")
    g.add_argument("--json", action="store_true", help="print one JSON object (stable schema)")


def _opts(a: argparse.Namespace) -> dict:
    return {"gpu": a.gpu, "gpu_mem_mib": a.gpu_mem_mib, "gpus_per_node": a.gpus_per_node, "nodes": a.nodes,
            "host_mem_gib": a.host_mem_gib, "engine_version": a.engine_version, "model_config": a.model_config,
            "weights_gib": a.weights_gib, "free_gib": a.free_gib, "avg_tokens": a.avg_tokens,
            "kv_memory_gib": a.kv_memory_gib}


def build_parser() -> argparse.ArgumentParser:
    from kvplan import __version__

    parser = argparse.ArgumentParser(
        prog="kvplan", description="What every GPU rank and host will allocate for an SGLang or vLLM launch, "
        "before you launch it.")
    parser.add_argument("--version", action="version", version=f"kvplan {__version__}")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND")
    c = sub.add_parser("check", help="preflight a real launch command: kvplan check [options] -- <command>",
                       description="Plan a launch command and report findings. Put the command after --.")
    _hardware_options(c)
    c.add_argument("--example", action="store_true",
                   help="check the built-in example (the Kimi-K2.5 HiCache incident: TP8, 300 GB per rank)")
    pl = sub.add_parser("plan", help="the same plan from plain options (no launch command)")
    _hardware_options(pl)
    pl.add_argument("--engine", default="sglang", help="engine (sglang)")
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
    ex = sub.add_parser("explain", help="reconcile a real startup log with the plan: kvplan explain LOG [-- command]",
                        description="Read an SGLang or vLLM startup log, rebuild the launch, and show, rank by rank, "
                        "what the log says next to what kvplan computes. The command after -- fills in flags the log "
                        "does not show.")
    ex.add_argument("log", help="the engine's startup log")
    _hardware_options(ex)
    from kvplan.diagnose.cli import add_parser as add_diagnose

    add_diagnose(sub)
    sub.add_parser("gpus", help="list the GPU catalog")
    sub.add_parser("models", help="list the embedded model catalog")
    from kvplan.launch.cli import add_parsers as add_launch_parsers

    add_launch_parsers(sub)
    from kvplan.simulate.cli import add_parsers as add_simulate_parsers

    add_simulate_parsers(sub)
    return parser


def _plan_extra(a: argparse.Namespace) -> list[str]:
    extra: list[str] = []
    for flag in ("mem_fraction_static", "kv_cache_dtype", "context_length", "max_running_requests", "page_size",
                 "hicache_size", "hicache_ratio"):
        v = getattr(a, flag)
        if v is not None:
            extra += [f"--{flag.replace('_', '-')}", str(v)]
    if a.enable_dp_attention:
        extra.append("--enable-dp-attention")
    if a.hicache_size is not None or a.hicache_ratio is not None:
        extra.append("--enable-hierarchical-cache")
    return extra


def _emit(result, as_json: bool) -> int:
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from kvplan.report.human import render

        render(result)
    return result.exit_code


def _run(argv: list[str]) -> int:
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    parser = build_parser()
    a = parser.parse_args(argv)
    if a.cmd is None:
        parser.print_help()
        return 2
    if a.cmd == "gpus":
        from kvplan.hardware.gpus import _index

        for g in sorted({id(v): v for v in _index().values()}.values(), key=lambda g: g["name"]):
            print(f"{g['name']:<48} {g['total_mib']:>8} MiB  aliases: {', '.join(g.get('aliases', []))}")
        return 0
    if a.cmd == "models":
        from kvplan.models.catalog import catalog_ids

        print("\n".join(catalog_ids()))
        return 0
    if a.cmd == "launch":
        from kvplan.launch.cli import run_launch

        return run_launch(a, command)
    if a.cmd == "cleanup":
        from kvplan.launch.cli import run_cleanup

        return run_cleanup(a)
    if a.cmd in ("simulate", "tune"):
        from kvplan.simulate.cli import run as run_simulate

        return run_simulate(a, command or None)
    if a.cmd == "diagnose":
        from kvplan.diagnose.cli import run as run_diagnose

        return run_diagnose(a, command or None)
    from kvplan import api

    if a.cmd == "explain":
        from kvplan.explain import explain

        opts = {k: v for k, v in _opts(a).items() if v is not None}
        opts.setdefault("host_mem_gib", 1024.0)  # a log's host is not this machine; only HiCache pools need it
        res = explain(a.log, command or None, **opts)
        if a.json:
            print(json.dumps(res.to_dict(), indent=2))
        else:
            from kvplan.report.explain import render_explain

            render_explain(res)
        return 0
    if a.cmd == "check":
        opts = _opts(a)
        if a.example:
            if command:
                parser.error("--example takes no launch command")
            command = INCIDENT
            opts.update({k: v for k, v in INCIDENT_OPTS.items() if opts.get(k) is None})
        if not command:
            parser.error("give the launch command after --, e.g. kvplan check --gpu h100 -- python -m "
                         "sglang.launch_server --model-path Qwen/Qwen3-8B (or try --example)")
        return _emit(api.check(command, **opts), a.json)
    if command:
        parser.error("kvplan plan takes options, not a launch command (use kvplan check for that)")
    return _emit(api.plan(a.model, engine=a.engine, tp=a.tp, dp=a.dp, pp=a.pp, extra_args=_plan_extra(a),
                          **_opts(a)), a.json)


def main(argv: Sequence[str] | None = None) -> int:
    from kvplan.errors import KvplanError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args)
    except KvplanError as e:
        print(f"kvplan: error: {e}", file=sys.stderr)
        return 2
    except (BrokenPipeError, KeyboardInterrupt):
        return 130
    except Exception as e:  # noqa: BLE001 - never a traceback for the user
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        print(f"kvplan: internal error: {type(e).__name__}: {e} (set KVPLAN_DEBUG=1 for a traceback; "
              "please report it)", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
