"""Plan rate: how many plans and checks a second kvplan makes in-process, and how long ``kvplan check --example``
takes from a cold start, next to Python's own speed measured in the same run.

    python benchmarks/plan_rate.py [--rounds 5] [--seconds 0.4] [--cold 5] [--json]

Launches (the slowest of them is the figure quoted):

* ``kimi``: the seeds' Kimi-K2.5 TP8 with HiCache on RTX PRO 6000, SGLang 0.5.9, 449 GiB host;
* ``qwen``: vLLM Qwen3-32B TP2 with native offloading (64 GiB), max-model-len 32768, on H100;
* ``dsv3``: vLLM DeepSeek-V3 TP8 on H200.

Per launch: ``engine.plan`` per second (the command split once; the engine parses its flags, resolves the model,
the cluster, the pool, the band and the host tiers each time), ``engine.plan`` per second with a new
``--mem-fraction-static`` / ``--gpu-memory-utilization`` every call (what ``tune`` and the planning page's sliders
ask: a new command each time, so nothing keyed by the command is reused; what the moved flag does not change, the
model's facts, the layout's weights, the version's defaults, is), and ``kvplan.check`` per second (the command text
planned, every finding rule, the suggested command re-checked; a new evaluation each call, nothing shared between
calls but the process-wide memos).

Each figure is the best of ``--rounds`` interleaved rounds of about ``--seconds`` each (noise only ever slows a
round down), counted both per wall second and per CPU second of this process (``time.process_time``: what another
process on the same cores does not add). A reference loop (``REFERENCE``: 20,000 integer additions in a Python
``for``) is timed in the same rounds: ``x ref`` is how many reference loops one plan costs, a figure that does not
move with the machine's speed. The cold start is ``python -m kvplan check --example`` run ``--cold`` times as a new
process, interleaved with ``python -c pass``: the median wall time of each and the children's CPU seconds, with the
bytecode cached as an installed package has it, and compiling every module (no bytecode cache at all).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KIMI = ("python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 --mem-fraction-static 0.85 "
        "--trust-remote-code --enable-hierarchical-cache --hicache-size 300")
LAUNCHES: dict[str, tuple[str, dict, str]] = {
    # name: (command, check's options, the flag a slider moves)
    "kimi": (KIMI, {"gpu": "rtx-pro-6000", "host_mem_gib": 449.0, "engine_version": "0.5.9"},
             "--mem-fraction-static"),
    "qwen": ("vllm serve Qwen/Qwen3-32B --tensor-parallel-size 2 --kv-offloading-size 64 --max-model-len 32768",
             {"gpu": "h100"}, "--gpu-memory-utilization"),
    "dsv3": ("vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8", {"gpu": "h200"},
             "--gpu-memory-utilization"),
}
REFERENCE_N = 20_000


def reference() -> int:
    """The reference loop: plain interpreter work whose cost moves with the machine, as kvplan's does."""
    s = 0
    for i in range(REFERENCE_N):
        s += i
    return s


def timed(f: Callable[[], object], seconds: float) -> tuple[float, float]:
    """(wall seconds, CPU seconds) per call of ``f``, over about ``seconds`` of calls (at least 3)."""
    n, w0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        f()
        n += 1
        w = time.perf_counter() - w0
        if w >= seconds and n >= 3:
            return w / n, (time.process_time() - c0) / n


def calls(name: str) -> dict[str, Callable[[], object]]:
    """The calls measured on launch ``name``."""
    from kvplan import check
    from kvplan.engines import detect_engine, split_command
    from kvplan.options import PlanOptions

    text, opts, slider = LAUNCHES[name]
    cmd = split_command(text)
    engine = detect_engine(cmd)
    options = PlanOptions(**opts)
    base = 0.85 if slider == "--mem-fraction-static" else 0.9
    count = iter(range(1 << 62))

    def slid() -> object:  # a new value every call: 0.85, 0.850001, ... (a plan cache would never hit)
        value = f"{base + next(count) % 50_000 * 1e-6:.6f}"
        return engine.plan(split_command(engine.rewrite(cmd, {slider: value})), options)

    return {"plan": lambda: engine.plan(cmd, options), "plan_slid": slid, "check": lambda: check(text, **opts)}


def measure(rounds: int, seconds: float) -> dict:
    fns = {name: calls(name) for name in LAUNCHES}
    for per in fns.values():  # warm: imports, the model's facts, the flag tables
        for f in per.values():
            f()
    best: dict[str, list[float]] = {}  # key -> [wall, cpu] seconds per call (min over rounds)
    for _ in range(rounds):
        items = [("reference", reference)] + [(f"{n}.{k}", f) for n, per in fns.items() for k, f in per.items()]
        for key, f in items:
            w, c = timed(f, seconds if key != "reference" else seconds / 4)
            b = best.setdefault(key, [w, c])
            b[0], b[1] = min(b[0], w), min(b[1], c)
    ref_w, ref_c = best["reference"]
    out: dict = {"reference": {"loops_per_s": 1 / ref_w, "loops_per_cpu_s": 1 / ref_c, "n": REFERENCE_N},
                 "launches": {}}
    for name in LAUNCHES:
        row = {}
        for k in ("plan", "plan_slid", "check"):
            w, c = best[f"{name}.{k}"]
            row[k] = {"per_s": 1 / w, "per_cpu_s": 1 / c, "ms": w * 1e3, "x_ref": c / ref_c}
        out["launches"][name] = row
    return out


def cold(n: int) -> dict:
    """Median wall seconds (and the child's CPU seconds) of ``kvplan check --example`` and ``python -c pass``, as an
    installed kvplan runs: its bytecode cached (one untimed run writes it; PYTHONDONTWRITEBYTECODE is dropped for
    the children), and once more compiling every module (an empty PYTHONPYCACHEPREFIX, nothing written)."""
    import tempfile

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    nopyc = {**env, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="kvplan-nopyc-")}

    def run(argv: list[str], e: dict[str, str]) -> tuple[float, float]:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=e)
        w = time.perf_counter() - t
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return w, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)

    example = [sys.executable, "-m", "kvplan", "check", "--example"]
    run(example, env)  # writes the bytecode
    base, ours, compiling = [], [], []
    for _ in range(n):  # interleaved, so the machine's noise hits all alike
        base.append(run([sys.executable, "-c", "pass"], env))
        ours.append(run(example, env))
        compiling.append(run(example, nopyc))
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
           for k, v in (("python", base), ("check_example", ours), ("compiling", compiling))}
    return {"runs": n, "python_c_pass_s": med["python"][0], "python_c_pass_cpu_s": med["python"][1],
            "check_example_s": med["check_example"][0], "check_example_cpu_s": med["check_example"][1],
            "check_example_compiling_s": med["compiling"][0], "check_example_compiling_cpu_s": med["compiling"][1]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.4, help="about this long per figure and round")
    ap.add_argument("--cold", type=int, default=5, help="cold starts of each process (0: skip)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))  # this checkout's kvplan, installed or not
    load0 = os.getloadavg()[0]
    res = measure(a.rounds, a.seconds)
    if a.cold:
        res["cold"] = cold(a.cold)
    res["loadavg_1min"] = [load0, os.getloadavg()[0]]
    res["cpus"] = os.cpu_count()
    if a.json:
        print(json.dumps(res, indent=1))
        return 0
    ref = res["reference"]
    print(f"load average {res['loadavg_1min'][0]:.2f} -> {res['loadavg_1min'][1]:.2f} on {res['cpus']} CPUs; "
          f"reference loop ({REFERENCE_N:,} additions): {ref['loops_per_s']:,.0f}/s, "
          f"{ref['loops_per_cpu_s']:,.0f}/CPU s")
    print(f"{'launch':6} {'figure':10} {'per s':>10} {'per CPU s':>10} {'ms':>8} {'x ref':>7}")
    for name, row in res["launches"].items():
        for k, v in row.items():
            print(f"{name:6} {k:10} {v['per_s']:10,.0f} {v['per_cpu_s']:10,.0f} {v['ms']:8.3f} {v['x_ref']:7.3f}")
    slow = {k: min(r[k]["per_cpu_s"] for r in res["launches"].values()) for k in ("plan", "plan_slid", "check")}
    print(f"slowest launch: {slow['plan']:,.0f} plans/CPU s (goal >= 5,000), {slow['plan_slid']:,.0f} with a new "
          f"fraction each, {slow['check']:,.0f} checks/CPU s (goal >= 500)")
    if "cold" in res:
        c = res["cold"]
        print(f"cold start, median of {c['runs']}: kvplan check --example {c['check_example_s']:.3f} s "
              f"({c['check_example_cpu_s']:.3f} CPU s; goal <= 0.3 s), python -c pass {c['python_c_pass_s']:.3f} s "
              f"({c['check_example_s'] / c['python_c_pass_s']:.1f}x); compiling every module (no bytecode cache) "
              f"{c['check_example_compiling_s']:.3f} s ({c['check_example_compiling_cpu_s']:.3f} CPU s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
