"""What a calibration log can and cannot tell apart, and how sure the fit is where it was not fitted.

The step model (steptime/model.py) prices a step as a fixed cost plus per-token terms:

    t = [γ + a_w w(B+N)] + a_c c(B+N) + s B + a_kv kv(K) + γ_p [prefill]
        fixed per step     per token      per decoding sequence

so a decoding sequence costs ``a_c c(1) + s`` and a prompt token ``a_c c(1)`` (dense). From the lines alone:

* the fixed / per-sequence split needs lines at more than one batch: lines whose steady batches span less than
  ``BATCH_SPAN`` (relative: 7-8 is 12.5 %) pin only ``fixed + per-sequence × B``. Then the per-sequence terms keep
  their prior (``a_c`` at the roofline's, ``s = 0``: the step's cost is taken as fixed, as vLLM-CPU showed it:
  ~8 ms at batch 4 and at batch 8, issue 29), and the other extreme (no fixed cost: everything per sequence,
  prompt tokens free) is kept as the alternative that widens the prediction;
* the cost of the KV attended needs the KV tokens in flight to vary across lines (by ``BATCH_SPAN``, relative);
  otherwise ``a_kv`` keeps its prior (the roofline's bytes; none without the GPU's figures);
* the prompt-token cost needs the prompt tokens per step to vary across lines by at least the mean batch
  (``PREFILL_SPAN``): a log whose every line ran ~5 prompt tokens per step fitted it at zero (issue 29: +37 % on
  a prompt-heavy load). Then ``s = 0`` (a prompt token costs what a decoding sequence costs beyond the fixed part),
  and the alternative prices prompt tokens at zero.

``leave_one_out``: each line predicted by the fit on the other lines (median absolute relative error): the error
where the fit was not fitted, which the in-sample error (11.5 % on the one-batch log) does not show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

BATCH_SPAN = 0.25  # (max - min) / max of the steady batches below which the split is not identified
PREFILL_SPAN = 1.0  # prompt tokens per step must vary by this many mean batches
STEADY = 0.5  # a line whose batch held over its interval (steptime/observe.py: weight 1; changed: < 0.3)
LOO_MAX = 40  # lines predicted in the leave-one-out (evenly spaced over the kept ones)

# column indices of steptime.model.NAMES
FIXED, WEIGHTS, KV, COMPUTE, PREFILL_BATCH, PER_SEQ = range(6)


@dataclass(frozen=True)
class Identification:
    batches: tuple[int, ...]  # the steady batches the lines ran
    prefill_span: float  # max - min prompt tokens per step over the lines
    mean_batch: float
    kv_span: float = 0.0  # (max - min) / max KV tokens attended over the lines

    @property
    def kv(self) -> bool:
        return self.kv_span >= BATCH_SPAN

    @property
    def batch(self) -> bool:
        if len(self.batches) < 2:
            return False
        return (max(self.batches) - min(self.batches)) / max(self.batches) >= BATCH_SPAN

    @property
    def prefill(self) -> bool:
        return self.prefill_span >= PREFILL_SPAN * max(1.0, self.mean_batch)

    def pins(self, prior: Sequence[float]) -> dict[int, float]:
        """Coefficients held at their prior because the lines do not tell them apart."""
        out: dict[int, float] = {} if self.kv else {KV: prior[KV]}
        if not self.batch:
            out |= {COMPUTE: prior[COMPUTE], PER_SEQ: 0.0, PREFILL_BATCH: prior[PREFILL_BATCH]}
        if not self.prefill:
            out |= {PER_SEQ: 0.0, PREFILL_BATCH: prior[PREFILL_BATCH]}
        return out

    def alternative_pins(self, prior: Sequence[float]) -> tuple[str, dict[int, float]] | None:
        """The other end of what the lines leave open (None: the fit identifies every term)."""
        kv = {} if self.kv else {KV: prior[KV]}
        if not self.batch:
            return ("no fixed cost: every step's cost per decoding sequence, prompt tokens free",
                    {FIXED: 0.0, WEIGHTS: prior[WEIGHTS], COMPUTE: 0.0, PREFILL_BATCH: prior[PREFILL_BATCH], **kv})
        if not self.prefill:
            return "prompt tokens free", {COMPUTE: 0.0, PREFILL_BATCH: prior[PREFILL_BATCH], **kv}
        return None

    def notes(self) -> tuple[str, ...]:
        out = []
        if not self.batch:
            ran = "no steady line" if not self.batches else \
                f"steady batches {min(self.batches)}-{max(self.batches)}"
            out.append(f"the calibration log's lines ran {ran}: the fixed per-step and per-sequence costs are not "
                       "told apart (unidentified); the per-sequence terms keep their prior (the step's cost taken as "
                       "fixed), and kvplan simulate widens its prediction to the other end (every step's cost per "
                       "sequence: prediction_band); a log at another batch pins it")
        if not self.prefill:
            out.append(f"the calibration log's prompt tokens per step vary by {self.prefill_span:.1f} (less than "
                       f"{PREFILL_SPAN:g} × its mean batch {self.mean_batch:.1f}): the prompt-token cost is not "
                       "identified; a prompt token is priced as a decoding sequence's per-token cost (prior), and "
                       "kvplan simulate widens its prediction to prompt tokens at no cost (prediction_band)")
        return tuple(out)


def identify(rows: Sequence) -> Identification:
    steady = tuple(sorted({int(r.running) for r in rows if r.weight >= STEADY and r.running}))
    pre = [r.prefill_per_step for r in rows]
    mean_b = sum(r.running for r in rows) / len(rows) if rows else 0.0
    kv = [r.kv_tokens for r in rows]
    kv_span = (max(kv) - min(kv)) / max(kv) if kv and max(kv) > 0 else 0.0
    return Identification(steady, (max(pre) - min(pre)) if pre else 0.0, mean_b, kv_span)


def leave_one_out(n: int, kept: Sequence[int], fit_without: Callable[[list[int]], Sequence[float]],
                  predict: Callable[[Sequence[float], int], float], ys: Sequence[float]) -> float | None:
    """Median |predicted - observed| / observed of each kept line predicted by the fit on the other kept lines
    (at most ``LOO_MAX`` lines, evenly spaced); None with fewer than 3 lines."""
    if len(kept) < 3:
        return None
    step = max(1, len(kept) // LOO_MAX)
    errs = []
    for i in kept[::step]:
        theta = fit_without([j for j in kept if j != i])
        errs.append(abs(predict(theta, i) - ys[i]) / ys[i])
    errs.sort()
    m = len(errs)
    return errs[m // 2] if m % 2 else (errs[m // 2 - 1] + errs[m // 2]) / 2


def median_abs(fitted: Sequence[float], ys: Sequence[float]) -> float:
    e = sorted(abs(f - y) / y for f, y in zip(fitted, ys, strict=True))
    m = len(e)
    return e[m // 2] if m % 2 else (e[m // 2 - 1] + e[m // 2]) / 2
