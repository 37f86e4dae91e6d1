"""``--calibrate LOG``: fit the step model to the user's own serving lines, with the roofline as the prior.

Maximum a posteriori of ``y = x·θ`` (steptime/observe.py) under a Gaussian prior centred on the roofline
(θ0 = (0, 1, 1, 1, 0)): ``θ = (XᵀX/σ² + Λ)⁻¹ (Xᵀy/σ² + Λθ0)``, ``Λ = diag(1/s_j²)`` with s = (mean y, 1, 1, 1,
mean y) when the GPU's figures are known (each roofline term may be off by ~100 %, the fixed overheads are of the
order of a step), and a prior 1000× weaker without them; σ is the residual scale (at least 2 % of mean y),
re-estimated twice. Coefficients stay >= 0 (active set). A log from one configuration pins the step time at the
batch sizes it saw; the prior decides how it extrapolates, which the report says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.simulate.steptime.model import NAMES, PRIOR, StepModel
from kvplan.simulate.steptime.observe import Observation, observations
from kvplan.simulate.steptime.roofline import Roofline

MIN_OBS = 3


@dataclass(frozen=True)
class Fit:
    model: StepModel
    rows: tuple[Observation, ...]
    fitted: tuple[float, ...]
    prior_pred: tuple[float, ...]
    sigma: float
    log: str
    inflight_tokens: float | None  # the log's KV tokens per running request

    @property
    def mape(self) -> float:
        return sum(abs(f - r.y) / r.y for f, r in zip(self.fitted, self.rows, strict=True)) / len(self.rows)

    @property
    def prior_mape(self) -> float:
        return sum(abs(f - r.y) / r.y for f, r in zip(self.prior_pred, self.rows, strict=True)) / len(self.rows)

    def to_dict(self, max_rows: int = 50) -> dict:
        rows = [{"t": r.t, "source": r.source, "running": r.running, "kv_tokens": round(r.kv_tokens),
                 "prefill_tokens_per_step": round(r.prefill_per_step, 1), "observed_step_s": round(r.y, 5),
                 "fitted_step_s": round(f, 5), "residual_pct": round((f - r.y) / r.y * 100, 2),
                 "observed_gen_tps": round(r.gen_tps, 1), "fitted_gen_tps": round(r.running / f, 1)}
                for r, f in zip(self.rows, self.fitted, strict=True)]
        return {"log": self.log, "observations": len(self.rows), "mape_pct": round(self.mape * 100, 2),
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
    mean_y = sum(ys) / len(ys)
    strength = 1.0 if roof.known else 1000.0
    scales = (mean_y * strength, strength, strength, strength, mean_y * strength)
    sigma = 0.05 * mean_y
    theta = list(PRIOR)
    for _ in range(3):
        theta = map_fit(xs, ys, PRIOR, scales, sigma)
        res = [y - sum(c * v for c, v in zip(theta, x, strict=True)) for x, y in zip(xs, ys, strict=True)]
        sigma = max(math.sqrt(sum(e * e for e in res) / len(res)), 0.02 * mean_y)
    t0, t1, t2, t3, t4 = theta
    model = StepModel(roof, (t0, t1, t2, t3, t4), f"calibrated on {log_path} ({len(rows)} serving lines)")
    fitted = tuple(sum(c * v for c, v in zip(theta, x, strict=True)) for x in xs)
    prior_pred = tuple(sum(c * v for c, v in zip(PRIOR, x, strict=True)) for x in xs)
    tok = [r.kv_tokens for r in rows if r.kv_tokens]
    run = [r.running for r in rows if r.kv_tokens]
    inflight = sum(tok) / sum(run) if run and sum(run) else None
    return Fit(model, tuple(rows), fitted, prior_pred, sigma, log_path, inflight)
