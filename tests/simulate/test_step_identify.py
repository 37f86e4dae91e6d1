"""The step model's fixed per-step cost, and what a one-batch log cannot tell apart (issue 29).

Serving lines are written by hand in vLLM V1's periodic stats format from known costs: a step of B decoding
requests takes t = 8 ms + 0.1 ms × B (vLLM-CPU's shape: the fixed cost dominates), no prompt tokens, no KV in use.
The roofline is a CPU's (no bandwidth/FLOP figures: a flat prior, calibration sets every scale).
"""

from __future__ import annotations

import pytest

from kvplan.simulate.steptime.calibrate import calibrate
from kvplan.simulate.steptime.roofline import Roofline

CPU = Roofline(weights_bytes=43_600_000, expert_fraction=0.0, n_experts=0, experts_per_token=0,
               kv_bytes_per_token=768, active_params_per_token=21.8e6, hardware_source="test: a CPU")
FIXED_S, PER_SEQ_S = 0.008, 0.0001


def _log(tmp_path, batches: list[int]) -> str:
    lines = []
    for i, b in enumerate(batches):
        t = FIXED_S + PER_SEQ_S * b
        lines.append(f"(APIServer pid=1) INFO 12-01 03:{i // 60:02d}:{i % 60:02d} [loggers.py:335] Engine 000: Avg "
                     f"prompt throughput: 0.0 tokens/s, Avg generation throughput: {b / t:.2f} tokens/s, Running: {b} "
                     "reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%")
    p = tmp_path / "v.log"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_lines_at_several_batches_recover_the_fixed_cost(tmp_path):
    # each batch held for three lines (a line whose batch changed weighs little: observe.py)
    fit = calibrate(_log(tmp_path, [b for b in (4, 5, 6, 7, 8) for _ in range(3)] + [4, 4]), CPU, 100_000)
    terms = fit.cost_terms()
    assert terms["fixed_step_s"] == pytest.approx(FIXED_S, rel=0.03)  # 8 ms
    assert terms["per_sequence_s"] == pytest.approx(PER_SEQ_S, rel=0.3)  # 0.1 ms
    assert not any("unidentified" in n for n in fit.notes)
    # no prompt tokens in the lines: their cost is the prior's (a decoding sequence's per-token cost), said and widened
    assert any("prompt-token cost is not identified" in n for n in fit.notes)
    assert fit.alternative is not None and fit.alternative[0] == "prompt tokens free"
    assert fit.loo_median is not None and fit.loo_median < 0.01
    # batch 1 (outside the lines) priced from the fitted terms: 8.1 ms
    assert fit.model.step(1, 0.0) == pytest.approx(FIXED_S + PER_SEQ_S, rel=0.03)
    d = fit.to_dict()
    assert d["leave_one_out_median_abs_pct"] is not None and "in_sample_median_abs_pct" in d


def test_lines_at_one_batch_keep_the_prior_and_widen(tmp_path):
    fit = calibrate(_log(tmp_path, [8] * 12), CPU, 100_000)
    assert any("not told apart (unidentified)" in n for n in fit.notes)
    # the prior kept: no per-sequence cost (the CPU roofline's flat prior is 0), the step is the fixed cost
    assert fit.model.coef[5] == pytest.approx(0.0, abs=1e-9) and fit.model.coef[3] == pytest.approx(0.0, abs=1e-6)
    assert fit.model.step(8, 0.0) == pytest.approx(FIXED_S + 8 * PER_SEQ_S, rel=0.01)  # what the lines measured
    assert fit.model.step(4, 0.0) == pytest.approx(FIXED_S + 8 * PER_SEQ_S, rel=0.01)
    # widened: the other end prices the whole step per sequence, so batch 4 costs half of batch 8's step
    assert fit.alternative is not None
    alt = fit.alternative[1]
    assert alt.step(8, 0.0) == pytest.approx(FIXED_S + 8 * PER_SEQ_S, rel=0.01)
    assert alt.step(4, 0.0) == pytest.approx((FIXED_S + 8 * PER_SEQ_S) / 2, rel=0.02)
    assert fit.to_dict()["alternative"]["what"].startswith("no fixed cost")
