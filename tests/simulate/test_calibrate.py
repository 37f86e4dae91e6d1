"""Calibration recovers step-time coefficients written into serving lines in the engines' exact formats
(SGLang 0.5.x "Decode batch," / "Prefill batch,"; vLLM V1 "Engine 000: Avg prompt throughput ...")."""

from __future__ import annotations

import random

import pytest

from kvplan.errors import KvplanError
from kvplan.simulate.steptime.calibrate import calibrate, map_fit
from kvplan.simulate.steptime.model import StepModel
from kvplan.simulate.steptime.roofline import Roofline

ROOF = Roofline(weights_bytes=74 * 10**9, expert_fraction=0.99, n_experts=384, experts_per_token=8,
                kv_bytes_per_token=70_272, active_params_per_token=4.1e9, mem_bw_gbps=1792, dense_tflops=503.8)
TRUE = (0.012, 1.30, 1.10, 0.80, 0.0, 0.0)  # the coefficients the lines are written from


def _sglang_log(path, model: StepModel, n: int = 80, seed: int = 1) -> None:
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        b = rnd.randint(8, 120)
        k = b * rnd.randint(1500, 3000)
        t = model.step(b, k)
        lines.append(f"[2026-02-24 11:{i // 60:02d}:{i % 60:02d} TP0] Decode batch, #running-req: {b}, #token: {k}, "
                     f"token usage: {k / 200000:.2f}, cuda graph: True, gen throughput (token/s): {b / t:.2f}, "
                     f"#queue-req: 0")
    path.write_text("\n".join(lines) + "\n")


def test_sglang_decode_lines_give_back_the_coefficients(tmp_path):
    log = tmp_path / "serve.log"
    _sglang_log(log, StepModel(ROOF, TRUE))
    fit = calibrate(str(log), ROOF, 200_000)
    assert fit.mape < 0.001
    g, aw, akv, ac, _, _ = fit.model.coef
    assert g == pytest.approx(TRUE[0], abs=0.002)
    assert aw == pytest.approx(TRUE[1], rel=0.05) and akv == pytest.approx(TRUE[2], rel=0.15)
    assert fit.prior_mape > 0.3  # the roofline alone is a lower bound, far off
    assert fit.inflight_tokens == pytest.approx(sum(r.kv_tokens for r in fit.rows) / sum(r.running for r in fit.rows))


def test_prefill_batches_between_decode_lines_are_charged(tmp_path):
    # a decode line every D=40 steps; a 6000-token prefill batch in between adds t_pre/40 to each step's mean
    m = StepModel(ROOF, TRUE)
    t_dec, t_pre = m.step(50, 100_000), m.step(0, 6000, 6000, prefill_batch=True)
    y = t_dec + t_pre / 40
    log = tmp_path / "s.log"
    log.write_text("[2026-02-24 11:00:00 TP0] Prefill batch, #new-seq: 6, #new-token: 6000, #cached-token: 0, "
                   "token usage: 0.50, #running-req: 50, #queue-req: 3\n"
                   f"[2026-02-24 11:00:01 TP0] Decode batch, #running-req: 50, #token: 100000, token usage: 0.50, "
                   f"cuda graph: True, gen throughput (token/s): {50 / y:.4f}, #queue-req: 3\n" * 5)
    fit = calibrate(str(log), ROOF, 200_000)
    first = fit.rows[0]
    assert first.prefill_per_step == pytest.approx(6000 / 40)
    assert sum(c * x for c, x in zip(TRUE, first.x, strict=True)) == pytest.approx(y, rel=1e-4)


def test_vllm_stats_lines(tmp_path):
    # y = mean batch / gen; prefill tokens per step = prompt × mean batch / gen; K = usage × pool. Running is the
    # snapshot at the line's end: the interval's mean batch is the mean of this line's and the previous line's
    # (the generator's truth here; exact when both show the same count)
    m = StepModel(ROOF, TRUE)
    rnd = random.Random(2)
    lines, prev = [], 32
    for i in range(40):
        b = rnd.choice([prev, prev, rnd.randint(4, 64)])
        mean_b = (b + prev) / 2
        n = rnd.choice([0, 0, 256, 1024])
        k = 0.01 * rnd.randint(10, 90) * 100_000
        t = m.step(mean_b, k, n)
        lines.append(f"(APIServer pid=1) INFO 12-01 03:06:{i:02d} [loggers.py:335] Engine 000: Avg prompt throughput: "
                     f"{n / t:.1f} tokens/s, Avg generation throughput: {mean_b / t:.1f} tokens/s, Running: {b} "
                     f"reqs, Waiting: 0 reqs, GPU KV cache usage: {k / 1000:.1f}%, Prefix cache hit rate: 0.0%")
        prev = b
    log = tmp_path / "v.log"
    log.write_text("\n".join(lines) + "\n")
    fit = calibrate(str(log), ROOF, 100_000)
    assert fit.mape < 0.01
    assert {r.weight for r in fit.rows if r.running == 32} >= {1.0}


def test_vllm_line_whose_batch_changed_weighs_less(tmp_path):
    # 4 -> 4: the batch is known (weight 1); 4 -> 3: mean 3.5, δ = 1/7, w = 0.0025 / (0.0025 + 0.0068) = 0.2687;
    # 4 -> 1: mean 2.5, δ = 0.6, w = 0.0025 / 0.1225 = 0.0204
    from kvplan.diagnose.stats import parse_samples
    from kvplan.simulate.steptime.observe import observations

    def line(i: int, running: int) -> str:
        return (f"(APIServer pid=1) INFO 12-01 03:06:{i:02d} [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 "
                f"tokens/s, Avg generation throughput: 700.0 tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
                "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")

    rows = observations(parse_samples([line(0, 4), line(1, 4), line(2, 3), line(3, 3), line(4, 4), line(5, 1)]),
                        ROOF, 100_000)
    assert [(r.running, round(r.weight, 3)) for r in rows] == [(4, 1.0), (3, 0.269), (3, 1.0), (4, 0.269), (1, 0.02)]
    assert rows[0].y == pytest.approx(4 / 700)
    assert rows[1].y == pytest.approx(3.5 / 700)
    assert rows[4].y == pytest.approx(2.5 / 700)


def test_vllm_line_after_an_idle_line_is_left_out(tmp_path):
    """An interval that began with nothing running was partly idle: its throughput averages the idle time in, so it
    would read as a slow step. Busy lines (80 tok/s each at 8 running: 0.1 s steps) are kept; the line after the
    idle one (Running: 0) shows 8 running at 10 tok/s (a 0.8 s 'step') and is dropped."""
    def line(i: int, running: int, gen: float) -> str:
        return (f"(APIServer pid=1) INFO 12-01 03:06:{i:02d} [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 "
                f"tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
                "GPU KV cache usage: 10.0%, Prefix cache hit rate: 0.0%")
    rows = [line(0, 8, 80.0), line(1, 8, 80.0), line(2, 0, 40.0), line(3, 8, 10.0)] + \
        [line(4 + i, 8, 80.0) for i in range(4)]
    log = tmp_path / "v.log"
    log.write_text("\n".join(rows) + "\n")
    fit = calibrate(str(log), ROOF, 100_000)
    assert len(fit.rows) + fit.dropped == 5  # the first line (no line before it) and the idle-start one are left out
    assert all(r.y == pytest.approx(0.1) for r in fit.rows)


def test_map_fit_keeps_coefficients_non_negative_and_follows_the_prior_where_data_say_nothing():
    xs = [(1.0, 0.02, 0.0, 0.0, 0.0, 0.0)] * 5  # only one direction observed
    theta = map_fit(xs, [0.05] * 5, (0.0, 1.0, 1.0, 1.0, 0.0, 0.0), (0.05, 1.0, 1.0, 1.0, 0.05, 1.0), 0.001)
    assert all(t >= 0 for t in theta)
    assert theta[2] == pytest.approx(1.0) and theta[3] == pytest.approx(1.0)  # unobserved: the prior
    assert theta[0] + 0.02 * theta[1] == pytest.approx(0.05, rel=0.01)


def test_a_log_without_serving_lines_is_refused(tmp_path):
    log = tmp_path / "startup.log"
    log.write_text("[2026-02-24 11:00:00 TP0] Load weight begin. avail mem=93.48 GB\n")
    with pytest.raises(KvplanError, match="serving line"):
        calibrate(str(log), ROOF, 1000)


def _vllm_log(path, running: list[int]) -> str:
    path.write_text("".join(
        f"(APIServer pid=1) INFO 12-01 03:06:{i:02d} [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        f"Avg generation throughput: {100.0 * r + 300:.1f} tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache "
        "usage: 1.0%, Prefix cache hit rate: 0.0%\n" for i, r in enumerate(running)))
    return str(path)


@pytest.mark.parametrize(("instances", "running_mean", "extrapolated"), [
    (1, 4.0, False), (1, 3.0, False), (1, 2.9, True),  # steady lines at 4: inside down to 0.75 × 4 = 3
    (1, 5.0, False), (1, 5.1, True),  # ... and up to 1.25 × 4 = 5
    (2, 8.0, False), (2, 12.0, True),  # summed over 2 schedulers: 4 and 6 each
])
def test_a_simulated_batch_outside_the_logs_steady_lines_is_named(tmp_path, instances, running_mean, extrapolated):
    from types import SimpleNamespace

    from kvplan.simulate.session import Session

    fit = calibrate(_vllm_log(tmp_path / "v.log", [4] * 8), ROOF, 100_000)
    ses = Session(SimpleNamespace(instances=instances), fit, None, None)  # type: ignore[arg-type]
    note = ses.coverage_check(SimpleNamespace(completed=10, running_mean=running_mean))
    assert (note is not None) == extrapolated, note
    if extrapolated:
        assert "steady serving lines ran 4 requests per scheduler" in note


def test_a_log_whose_batch_never_held_says_so(tmp_path):
    # 4, 3, 4, 3, ...: every line's batch changed inside its interval (weight 0.27 < 0.5), none is steady
    from types import SimpleNamespace

    from kvplan.simulate.session import Session

    fit = calibrate(_vllm_log(tmp_path / "v.log", [4, 3] * 5), ROOF, 100_000)
    ses = Session(SimpleNamespace(instances=1), fit, None, None)  # type: ignore[arg-type]
    note = ses.coverage_check(SimpleNamespace(completed=10, running_mean=3.5))
    assert note is not None and "no serving line whose batch held" in note


def _vllm_steps(path, running: list[int], step_s) -> str:
    """vLLM V1 stats lines of decode-only intervals (no prompt tokens) whose step takes ``step_s(batch)``."""
    path.write_text("".join(
        f"(APIServer pid=1) INFO 12-01 03:06:{i:02d} [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        f"Avg generation throughput: {r / step_s(r):.1f} tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache "
        "usage: 1.0%, Prefix cache hit rate: 0.0%\n" for i, r in enumerate(running)))
    return str(path)


CPU_ROOF = Roofline(weights_bytes=28_000_000, expert_fraction=0.0, n_experts=0, experts_per_token=0,
                    kv_bytes_per_token=4096, active_params_per_token=14e6, mem_bw_gbps=None, dense_tflops=None)
BATCHES = [1, 1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8] * 2


def test_flat_steps_without_prompts_say_long_prompts_are_unbounded(tmp_path):
    # vLLM-CPU, a 16-layer 256-wide model: ~8.6 ms a step at batch 1 and at 8 (benchmarks/sim_matrix.py, llama_deep P)
    fit = calibrate(_vllm_steps(tmp_path / "flat.log", BATCHES, lambda b: 0.0086), CPU_ROOF, 4096)
    assert fit.model.step(0, 0.0, 1) - fit.model.decode_base(0) < 0.02 * fit.model.decode_base(0)
    assert any("prompt tokens come out nearly free" in n for n in fit.notes), fit.notes
    # steps that grow with the batch (5 ms + 0.5 ms a sequence) price a prompt token like a sequence: no such note
    fit = calibrate(_vllm_steps(tmp_path / "grows.log", BATCHES, lambda b: 0.005 + 0.0005 * b), CPU_ROOF, 4096)
    assert not any("nearly free" in n for n in fit.notes), fit.notes
    assert fit.model.step(0, 0.0, 1) - fit.model.decode_base(0) > 0.0003
