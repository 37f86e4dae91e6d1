"""Serving lines of a log -> step-time observations (y = seconds per decode step, x = roofline features).

Lines are parsed by ``kvplan.diagnose.stats.parse_samples`` (SGLang "Decode batch" / "Prefill batch", vLLM periodic
stats); each observation is one line of one scheduler (a DP group / an engine), by its own numbers:

* SGLang decode line (``scheduler_metrics_mixin.py::log_decode_stats``, 0.5.9): printed every
  ``decode_log_interval`` (D) decode steps, ``gen throughput = tokens since the last line / wall time since it``, so
  ``y = #running / gen`` is the mean wall time per decode step *including* the prefill batches run in between (the
  "Prefill batch" lines since the previous decode line of the same scheduler):
  ``y = t_dec(B, K) + Σ_j t_pre(N_j, ctx_j) / D`` with ``K = #token``.
* vLLM stats line (``v1/metrics/loggers.py::LoggingStatLogger``): average prompt (X) and generation (Y) throughput
  over the interval, running requests B, KV usage U: a step yields B tokens, so ``y = B / Y`` and the prefill
  tokens per step are ``N = X × B / Y``, ``K = U × pool``. ``Running`` is a snapshot at the line's end (the last
  step's ``SchedulerStats``), Y an average over the interval, so B is the interval's mean batch only when the
  previous line showed the same count; otherwise B is taken as the mean of the two snapshots, uncertain by
  ``δ = |B1 - B0| / (B1 + B0)`` relative (uniform over the range: variance δ²/3), and the line weighs its inverse
  variance against a known-batch line's noise ``LINE_NOISE``: ``w = s² / (s² + δ²/3)`` (4 -> 3: 0.27; 4 -> 1:
  0.02); with the end snapshot alone, a line whose interval ran 4 requests and ended with 1 reads as a 4× faster
  step, and a fit over such lines prices the batch size far too steeply. A line whose
  previous line showed no running request is left out (the engine was idle for part of that interval, which Y
  averages in: under a light load every such line reads as a slow step).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kvplan.simulate.steptime.roofline import Roofline


@dataclass(frozen=True)
class Observation:
    y: float  # seconds per decode step
    x: tuple[float, float, float, float, float, float]  # the step model's columns
    running: int
    kv_tokens: float
    gen_tps: float
    prefill_per_step: float
    source: str
    t: float | None
    weight: float = 1.0  # 1: the batch is known for the whole interval; less: it changed inside it


LINE_NOISE = 0.05  # relative scatter of a vLLM stats line whose batch is known (1 s lines of a steady decode)


def _add(a: tuple, b: tuple, w: float = 1.0) -> tuple:
    return tuple(p + w * q for p, q in zip(a, b, strict=True))


def observations(samples: Iterable, roof: Roofline, pool_tokens: int, decode_interval: int = 40) -> list[Observation]:
    out: list[Observation] = []
    pending: dict[str, list] = {}  # source -> prefill samples since its last decode line
    before: dict[str, int] = {}  # source -> running requests at its previous stats line
    for s in samples:
        if s.kind == "prefill":
            pending.setdefault(s.source, []).append(s)
            continue
        if s.kind not in ("decode", "stats"):
            continue
        prev = 0
        if s.kind == "stats":
            prev = before.get(s.source or "", 0)
            before[s.source or ""] = int(s.running or 0)
            if not prev:  # idle (or unknown) when the interval began: part of the interval was idle time
                continue
        if not s.running or not s.gen_tps or s.gen_tps <= 0:
            continue
        b: float = int(s.running)
        weight = 1.0
        if s.kind == "stats" and prev != b:  # the batch changed inside the interval: its mean, less sure
            delta = abs(b - prev) / (b + prev)
            b, weight = (prev + b) / 2, LINE_NOISE**2 / (LINE_NOISE**2 + delta**2 / 3)
        y = b / float(s.gen_tps)
        if s.kind == "decode":
            k = float(s.tokens) if s.tokens is not None else (s.usage or 0.0) * pool_tokens
            x = roof.features(int(b), k)
            pre = pending.pop(s.source, [])
            n_tok = 0.0
            for p in pre:
                n = float(p.new_tokens or 0)
                ctx = n + float(p.cached_tokens or 0)
                x = _add(x, roof.features(0, ctx, int(n), 1.0), 1.0 / decode_interval)
                n_tok += n
            per_step = n_tok / decode_interval
        else:
            per_step = (float(s.prompt_tps or 0.0) * b / float(s.gen_tps))
            k = (s.usage or 0.0) * pool_tokens
            x = roof.features(b, k, per_step)
        out.append(Observation(y, x, int(s.running), k, float(s.gen_tps), per_step, s.source or "", s.t, weight))
    return out
