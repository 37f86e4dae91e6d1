"""``--calibrate LOG``: fit the step model to the user's own serving lines, with the roofline as the prior.

Maximum a posteriori of ``y = x·θ`` (steptime/observe.py) in relative error, under a Gaussian prior centred on the
roofline (θ0 = (0, 1, 1, 1, 0)): ``θ = (XᵀX/σ² + Λ)⁻¹ (Xᵀy/σ² + Λθ0)`` on the rows x/y, ``Λ = diag(1/s_j²)`` with
s = (mean y, 1, 1, 1, mean y) when the GPU's figures are known (each roofline term may be off by ~100 %, the fixed
overheads are of the order of a step); without them the prior is flat (see ``fit_relative``). σ is the relative
residual scale (at least 2 %), outlying lines are dropped robustly. Coefficients stay >= 0 (active set). A log from
one configuration pins the step time at the batch sizes it saw; the prior decides how it extrapolates: terms the lines
do not identify (one batch, no prompt-token variation, constant KV: steptime/identify.py) are pinned at their prior,
the other end of what they leave open is kept as ``Fit.alternative`` (the prediction's band), and ``loo_median`` is
the leave-one-out error beside the in-sample one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.simulate.steptime.identify import identify, leave_one_out, median_abs
from kvplan.simulate.steptime.model import NAMES, PRIOR, Coef, StepModel
from kvplan.simulate.steptime.observe import Observation, observations
from kvplan.simulate.steptime.roofline import Roofline

MIN_OBS = 3
PIN = 1e-6  # a pinned coefficient's prior scale, relative to its free one


@dataclass(frozen=True)
class Fit:
    model: StepModel
    rows: tuple[Observation, ...]
    fitted: tuple[float, ...]
    prior_pred: tuple[float, ...]
    sigma: float
    log: str
    inflight_tokens: float | None  # the log's KV tokens per running request
    dropped: int = 0  # outlying lines left out of the fit
    notes: tuple[str, ...] = ()  # what the lines do not identify (steptime/identify.py)
    alternative: tuple[str, StepModel] | None = None  # the other end of what the lines leave open
    loo_median: float | None = None  # leave-one-out median |error| / observed
    in_sample_median: float = 0.0  # the same on the lines fitted

    def cost_terms(self) -> dict:
        """The fitted step as a fixed cost per step, a cost per decoding sequence and per prompt token (no KV)."""
        m = self.model
        fixed = m.decode_base(0)
        per_seq = m.decode_base(1) - fixed
        per_prompt = m.step(0, 0.0, 1) - fixed
        return {"fixed_step_s": round(fixed, 6), "per_sequence_s": round(per_seq, 7),
                "per_prompt_token_s": round(per_prompt, 7)}

    @property
    def mape(self) -> float:
        return sum(abs(f - r.y) / r.y for f, r in zip(self.fitted, self.rows, strict=True)) / len(self.rows)

    @property
    def prior_mape(self) -> float:
        return sum(abs(f - r.y) / r.y for f, r in zip(self.prior_pred, self.rows, strict=True)) / len(self.rows)

    def to_dict(self, max_rows: int = 50) -> dict:
        rows = [{"t": r.t, "source": r.source, "running": r.running, "mean_batch": round(r.y * r.gen_tps, 2),
                 "weight": round(r.weight, 3), "kv_tokens": round(r.kv_tokens),
                 "prefill_tokens_per_step": round(r.prefill_per_step, 1), "observed_step_s": round(r.y, 5),
                 "fitted_step_s": round(f, 5), "residual_pct": round((f - r.y) / r.y * 100, 2),
                 "observed_gen_tps": round(r.gen_tps, 1), "fitted_gen_tps": round(r.y * r.gen_tps / f, 1)}
                for r, f in zip(self.rows, self.fitted, strict=True)]
        return {"log": self.log, "observations": len(self.rows), "dropped_outliers": self.dropped,
                "mape_pct": round(self.mape * 100, 2),
                "in_sample_median_abs_pct": round(self.in_sample_median * 100, 2),
                "leave_one_out_median_abs_pct": None if self.loo_median is None else round(self.loo_median * 100, 2),
                "terms": self.cost_terms(), "notes": list(self.notes),
                "alternative": None if self.alternative is None else {
                    "what": self.alternative[0], "coefficients": dict(zip(NAMES, (round(c, 6) for c in
                                                                                  self.alternative[1].coef),
                                                                          strict=True))},
                "prior_mape_pct": round(self.prior_mape * 100, 2), "sigma_s": round(self.sigma, 6),
                "coefficients": dict(zip(NAMES, (round(c, 6) for c in self.model.coef), strict=True)),
                "log_inflight_tokens_per_request": None if self.inflight_tokens is None
                else round(self.inflight_tokens), "rows": rows[-max_rows:]}


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[p][c]) < 1e-300:
            raise KvplanError("calibration: singular system")
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def map_fit(xs: list[tuple], ys: list[float], prior: tuple, scales: tuple, sigma: float) -> list[float]:
    """MAP coefficients with non-negativity (coefficients that go negative are pinned at 0 and the rest refit)."""
    n = len(prior)
    free = list(range(n))
    theta = [0.0] * n
    for _ in range(n + 1):
        a = [[sum(x[i] * x[j] for x in xs) / sigma**2 + (1 / scales[i] ** 2 if i == j else 0.0) for j in free]
             for i in free]
        b = [sum(x[i] * y for x, y in zip(xs, ys, strict=True)) / sigma**2 + prior[i] / scales[i] ** 2 for i in free]
        sol = _solve(a, b)
        theta = [0.0] * n
        for i, v in zip(free, sol, strict=True):
            theta[i] = v
        neg = [i for i in free if theta[i] < 0]
        if not neg:
            return theta
        for i in neg:
            free.remove(i)
            theta[i] = 0.0
        if not free:
            return theta
    return theta


def calibrate(log_path: str, roof: Roofline, pool_tokens: int, decode_interval: int = 40) -> Fit:
    from kvplan.diagnose.stats import parse_samples
    from kvplan.logs.reader import iter_lines

    samples = parse_samples(iter_lines(log_path))
    rows = observations(samples, roof, pool_tokens, decode_interval)
    if len(rows) < MIN_OBS:
        raise KvplanError(f"{log_path}: {len(rows)} serving line(s) with running requests and a throughput; "
                          f"calibration needs at least {MIN_OBS}",
                          "give a log with SGLang 'Decode batch' lines or vLLM periodic stats under load")
    xs, ys = [r.x for r in rows], [r.y for r in rows]
    ws = [r.weight for r in rows]
    ident = identify(rows)
    base_prior = PRIOR if roof.known else (0.0,) * len(PRIOR)
    pins = ident.pins(base_prior)
    theta, sigma, kept = fit_relative(xs, ys, roof.known, ws, pins)
    model = StepModel(roof, _coef(theta), f"calibrated on {log_path} ({len(kept)} of {len(rows)} serving lines)")
    used = tuple(rows[i] for i in kept)
    fitted = tuple(_dot(theta, r.x) for r in used)
    prior_pred = tuple(_dot(PRIOR, r.x) for r in used)
    tok = [r.kv_tokens for r in used if r.kv_tokens]
    run = [r.running for r in used if r.kv_tokens]
    inflight = sum(tok) / sum(run) if run and sum(run) else None
    alt = None
    alt_pins = ident.alternative_pins(base_prior)
    if alt_pins is not None:
        a_theta, _, _ = fit_relative([xs[i] for i in kept], [ys[i] for i in kept], roof.known,
                                     [ws[i] for i in kept], alt_pins[1], drop=False)
        alt = (alt_pins[0], StepModel(roof, _coef(a_theta), f"{model.source}, the other end: {alt_pins[0]}"))

    def without(idx: list[int]) -> list[float]:
        return fit_relative([xs[i] for i in idx], [ys[i] for i in idx], roof.known, [ws[i] for i in idx], pins,
                            drop=False)[0]

    loo = leave_one_out(len(rows), kept, without, lambda th, i: _dot(th, xs[i]), ys)
    notes = ident.notes() + _free_prompt_note(model, ident.prefill)
    return Fit(model, used, fitted, prior_pred, sigma, log_path, inflight, len(rows) - len(kept), notes, alt, loo,
               median_abs(fitted, [r.y for r in used]))


FREE_PROMPT = 0.02  # a prompt token costing under 2 % of the fixed step: priced as (nearly) free


def _free_prompt_note(model: StepModel, prefill_identified: bool) -> tuple[str, ...]:
    """When the prompt cost is unidentified and the per-sequence cost it falls back to came out ~0 (steps flat in the
    batch: on vLLM-CPU a 16-layer 256-wide model took ~8.6 ms a step at batch 1 and at 8), the prediction has no
    upper bound on long prompts: the alternative end (prompt tokens free) is the fit itself (benchmarks/sim_matrix.py:
    P -> Q +47 %)."""
    if prefill_identified:
        return ()
    fixed = model.decode_base(0)
    per_prompt = model.step(0, 0.0, 1) - fixed
    if fixed <= 0 or per_prompt >= FREE_PROMPT * fixed:
        return ()
    return (f"this log's steps barely grow with the batch either (a prompt token or a decoding sequence adds "
            f"{per_prompt * 1e3:.3f} ms to a {fixed * 1e3:.2f} ms step): prompt tokens come out nearly free, so a "
            "load with long prompts is predicted too fast and prediction_band does not bound it from above; "
            "calibrate on a log whose lines include long prompts",)


def _dot(theta: Sequence[float], x: Sequence[float]) -> float:
    return sum(c * v for c, v in zip(theta, x, strict=True))


def _coef(theta: Sequence[float]) -> Coef:
    t0, t1, t2, t3, t4, t5 = theta
    return (t0, t1, t2, t3, t4, t5)


def fit_relative(xs: list[tuple], ys: list[float], known: bool, weights: list[float] | None = None,
                 pins: dict[int, float] | None = None, drop: bool = True) -> tuple[list[float], float, list[int]]:
    """MAP fit of relative errors ``(y - x·θ) / y`` (a line of a 10 ms step weighs as much as one of 100 ms), with
    lines whose relative residual is more than 3 robust standard deviations (1.4826 × MAD) from the median dropped
    (at most 30 %: ramp-up lines of one request mostly prefilling, idle intervals). Without GPU figures the prior is
    flat: each coefficient may explain 10× the mean step time on its own. ``weights`` scale each line's squared
    residual (a vLLM line whose batch changed inside its interval counts less than one whose batch is known).
    ``pins``: coefficients held at a value (steptime/identify.py: what the lines do not identify); ``drop``: False
    fits every line given (the leave-one-out refits on the kept lines)."""
    n = len(ys)
    mean_y = sum(ys) / n
    means = [sum(x[j] for x in xs) / n for j in range(len(PRIOR))]
    # with the GPU's roofline the batch is priced by its terms; what a sequence adds beyond its token (sampling, its
    # attention launch) is a small share of a step: 10 % of the mean step over the mean batch
    per_seq = 0.1 * mean_y / means[5] if means[5] > 0 else 1e30
    prior: tuple[float, ...] = PRIOR
    scales: tuple[float, ...] = (mean_y, 1.0, 1.0, 1.0, mean_y, per_seq)
    if not known:
        prior = (0.0,) * len(PRIOR)
        scales = tuple(10 * mean_y / m if m > 0 else 1e30 for m in means)
    if pins:
        prior = tuple(pins.get(j, p) for j, p in enumerate(prior))
        scales = tuple(PIN * s if j in pins else s for j, s in enumerate(scales))
    kept = list(range(n))
    sigma = 0.05
    theta = list(prior)
    for it in range(4):
        sw = [math.sqrt(weights[i]) if weights else 1.0 for i in kept]
        rx = [tuple(v * w / ys[i] for v in xs[i]) for i, w in zip(kept, sw, strict=True)]
        theta = map_fit(rx, sw, prior, scales, sigma)
        res = [1.0 - sum(c * v for c, v in zip(theta, xs[i], strict=True)) / ys[i] for i in range(n)]
        kres = sorted(res[i] for i in kept)
        w2 = [weights[i] if weights else 1.0 for i in kept]
        sigma = max(math.sqrt(sum(w * res[i] ** 2 for i, w in zip(kept, w2, strict=True)) / sum(w2)), 0.02)
        if it == 3 or not drop:
            break
        med = kres[len(kres) // 2]
        mad = sorted(abs(e - med) for e in kres)[len(kres) // 2]
        cut = 3 * max(1.4826 * mad, 0.01)
        new = [i for i in range(n) if abs(res[i] - med) <= cut]
        floor = max(MIN_OBS, int(0.7 * n + 0.999))
        if len(new) < floor:  # never drop more than 30 %: keep the closest
            new = sorted(sorted(range(n), key=lambda i: abs(res[i] - med))[:floor])
        if len(new) < MIN_OBS or new == kept:
            break
        kept = new
    return theta, sigma, kept
