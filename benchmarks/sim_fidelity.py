"""Simulation vs the REAL vLLM-CPU engine under load: calibrate on one configuration, predict the others.

    python benchmarks/sim_fidelity.py [--out DIR] [--json]

Starts the engine (<repo>/.venv-vllm, a 23 M-parameter random-weight Llama, 127.0.0.1) once per configuration, one
at a time under the machine's engine lock (/tmp/kvplan-engine.lock), each with the same scheduled load (24 requests,
400-token distinct prompts, 100-300 output tokens, 6 requests 1 s apart then the rest at once, through 4 clients,
C 2):

    A  32 MiB KV, max-num-seqs 16   (calibration: its log's serving lines fit the step model)
    B   8 MiB KV, max-num-seqs 16   (2,048 tokens for 4 requests of up to 700: queueing and preemption)
    C  32 MiB KV, max-num-seqs 16, 2 clients   (the launch of A under less concurrency)
    D  32 MiB KV, max-num-seqs 1    (the engine's running cap: one request at a time, three clients queued)

For each it prints the real generation throughput and mean latency next to the simulation of the same launch and
the same requests as scheduled (``kvplan simulate --calibrate A.log --workload <requests, arrival = when due>
--concurrency N -- <launch>``: when a client is free to send is the simulation's own prediction), the errors, and
the real run's wall time over the simulation's; then whether the simulation orders B, C, D (and A) as the engine did,
and the engine's own drift: A launched once more at the end (A2), against A.

The machine's speed: each launch also serves a fixed probe request alone before and after its load
(tests/simulate/vllm_load.py). ``speed`` is its rate over A's; ``err@A`` is the error against the real figure read
at A's machine speed (real / speed), which separates what the configuration did from what the shared VM's weather
did between launches; the raw ``err`` is printed beside it, and the order is judged on the figures at A's speed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))



def measure(out: Path) -> list[dict]:
    from dataclasses import replace

    from tests.simulate.vllm_load import configs, run_all, simulate_like, tiny_model

    cfgs = configs()
    cfgs += (replace(cfgs[0], name="A2"),)  # A once more at the end: the engine's own drift over the run
    runs = run_all(tiny_model(out / "models"), out, cfgs, lambda m: print(m, file=sys.stderr))
    calib = out / "A.log"
    ref = runs[0]
    rows = []
    for run in runs:
        sim = simulate_like(run, calib, out)
        speed = run.speed_vs(ref)
        rows.append({"config": run.config.name, "flags": " ".join(run.config.flags()),
                     "real_gen_tps": round(run.gen_tps, 2), "sim_gen_tps": round(sim["gen_tps"], 2),
                     "tps_err_pct": round((sim["gen_tps"] / run.gen_tps - 1) * 100, 1) if run.gen_tps else None,
                     "probe_tps": [round(x, 2) for x in run.probes_tps], "speed_vs_calibration": round(speed, 4),
                     "real_gen_tps_at_calibration_speed": round(run.gen_tps / speed, 2),
                     "tps_err_at_calibration_speed_pct": round((sim["gen_tps"] * speed / run.gen_tps - 1) * 100, 1)
                     if run.gen_tps else None,
                     "real_mean_latency_s": round(run.mean_latency_s, 3),
                     "sim_mean_latency_s": round(sim["mean_latency_s"], 3),
                     "latency_err_pct": round((sim["mean_latency_s"] / run.mean_latency_s - 1) * 100, 1)
                     if run.mean_latency_s else None,
                     "real_load_s": round(run.load_s, 2), "sim_s": round(sim["sim_s"], 4),
                     "speedup": round(run.load_s / sim["sim_s"]) if sim["sim_s"] else None,
                     "sim_running_mean": round(sim["running_mean"], 1), "sim_preempted": sim["preempted"],
                     "used_for_calibration": run.config.name == "A", "errors": len(run.errors),
                     "calibration_mape_pct": (sim["calibration"] or {}).get("mape_pct")})
    return rows


def ordering(rows: list[dict]) -> tuple[list[str], list[str]]:
    real = [r["config"] for r in sorted(rows, key=lambda r: -r["real_gen_tps"])]
    sim = [r["config"] for r in sorted(rows, key=lambda r: -r["sim_gen_tps"])]
    return real, sim


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="directory for logs and workloads (default: a temporary one)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="kvplan-simfid-"))
    out.mkdir(parents=True, exist_ok=True)
    from tests.simulate.vllm_load import SEPARATED, misordered

    measured = measure(out)
    rows = [r for r in measured if r["config"] != "A2"]  # A2 measures the engine's drift, not a prediction
    again = next((r for r in measured if r["config"] == "A2"), None)
    calib = next(r for r in rows if r["used_for_calibration"])
    drift_pct = round((again["real_gen_tps"] / calib["real_gen_tps"] - 1) * 100, 1) if again else None
    at_speed = [{**r, "real_gen_tps": r["real_gen_tps_at_calibration_speed"]} for r in rows]
    real, sim = ordering(at_speed)
    wrong = misordered(at_speed)
    held = [abs(r["tps_err_pct"]) for r in rows if not r["used_for_calibration"]]
    held_n = [abs(r["tps_err_at_calibration_speed_pct"]) for r in rows if not r["used_for_calibration"]]
    if a.json:
        print(json.dumps({"rows": rows, "real_order": real, "sim_order": sim,
                          "misordered_pairs": [list(p) for p in wrong], "held_out_mean_abs_err_pct":
                          round(sum(held) / len(held), 1), "held_out_max_abs_err_pct": max(held),
                          "held_out_mean_abs_err_at_calibration_speed_pct": round(sum(held_n) / len(held_n), 1),
                          "held_out_max_abs_err_at_calibration_speed_pct": max(held_n),
                          "calibration_rerun": again, "engine_drift_pct": drift_pct}, indent=2))
        return 0
    print(f"{'cfg':<4}{'real tok/s':>11}{'sim tok/s':>11}{'err':>8}{'speed':>7}{'err@A':>8}{'real lat':>10}"
          f"{'sim lat':>9}{'err':>8}{'real s':>8}{'sim s':>8}{'ratio':>8}")
    for r in rows:
        print(f"{r['config']:<4}{r['real_gen_tps']:>11.1f}{r['sim_gen_tps']:>11.1f}{r['tps_err_pct']:>7.1f}%"
              f"{r['speed_vs_calibration']:>7.2f}{r['tps_err_at_calibration_speed_pct']:>7.1f}%"
              f"{r['real_mean_latency_s']:>10.2f}{r['sim_mean_latency_s']:>9.2f}{r['latency_err_pct']:>7.1f}%"
              f"{r['real_load_s']:>8.1f}{r['sim_s']:>8.3f}{r['speedup']:>7}×"
              + ("  (calibration)" if r["used_for_calibration"] else ""))
    print(f"order by throughput (real at A's speed): real {' > '.join(real)}, simulated {' > '.join(sim)}; pairs "
          f"apart by more than {SEPARATED:.0%} ordered wrong: {', '.join(f'{x}>{y}' for x, y in wrong) or 'none'}")
    print(f"held-out throughput error: mean {sum(held) / len(held):.1f} %, max {max(held):.1f} %; at A's machine "
          f"speed: mean {sum(held_n) / len(held_n):.1f} %, max {max(held_n):.1f} %")
    if again:
        print(f"the engine's own drift: A launched again at the end made {again['real_gen_tps']:.1f} tok/s, "
              f"{drift_pct:+.1f} % against A (its probe: speed {again['speed_vs_calibration']:.2f}, at A's speed "
              f"{again['tps_err_at_calibration_speed_pct']:+.1f} % from the simulation)")
    print(f"logs and workloads: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
