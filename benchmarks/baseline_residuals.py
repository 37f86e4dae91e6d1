"""The SGLang free-memory baseline T per rank: every sourced log against the model (engines/sglang/baseline.py).

    python benchmarks/baseline_residuals.py

One row per log (GPU, ranks per node x nodes, T logged, T modelled from all logs, residual, band, and the
leave-one-out prediction), then ``baseline: N logs, X inside the band, max |residual| R GiB (held-out: ...)``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> int:
    from kvplan.engines.sglang.baseline import residuals

    full, loo = residuals(), residuals(leave_one_out=True)
    print(f"{'GPU':56} {'TPxN':>5} {'T log':>8} {'T model':>8} {'resid':>6} {'band':>17} {'held-out':>9}")
    for r, h in zip(full, loo, strict=True):
        p = r.point
        flag = " (implied)" if p.implied else ""
        print(f"{(p.gpu + flag)[:56]:56} {p.tp_local}x{p.nodes:<3} {p.t_gib:8.2f} {r.modelled_t_gib:8.2f} "
              f"{r.residual_gib:+6.2f} [{r.low_t_gib:7.2f},{r.high_t_gib:7.2f}] {h.residual_gib:+9.2f}")
    print(f"baseline: {len(full)} logs, {sum(r.inside for r in full)} inside the band, max |residual| "
          f"{max(abs(r.residual_gib) for r in full):.2f} GiB (held-out: {sum(r.inside for r in loo)} inside, "
          f"max |residual| {max(abs(r.residual_gib) for r in loo):.2f} GiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
