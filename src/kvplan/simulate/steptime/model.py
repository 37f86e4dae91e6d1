"""Step time ``t(batch, tokens in flight, prefill tokens)``, linear in the roofline features, and its closed forms.

    t = γ + a_w × weights_s(B + N) + a_kv × kv_s(K) + a_c × compute_s(B + N) + γ_p × [prefill batch] + s × B

The prior is the roofline itself (γ = γ_p = 0, a = 1); ``--calibrate`` fits the coefficients to the user's log
(steptime/calibrate.py). During a decode span the batch ``B`` is fixed and ``K`` grows by ``B`` per step, so the
time of ``n`` steps and the steps that fit in a time are closed forms:

    span(n) = n × A(B) + c_K × (n × K0 + B × n (n - 1) / 2),   A(B) = γ + a_w w(B) + a_c c(B) + s B,  c_K = a_kv kv_s(1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kvplan.simulate.steptime.roofline import Roofline

PRIOR = (0.0, 1.0, 1.0, 1.0, 0.0, 0.0)
NAMES = ("overhead_s", "weights_scale", "kv_scale", "compute_scale", "prefill_overhead_s", "per_sequence_s")
Coef = tuple[float, float, float, float, float, float]


@dataclass(frozen=True)
class StepModel:
    roof: Roofline
    coef: Coef = PRIOR
    source: str = "roofline prior (uncalibrated lower bound)"
    _a: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        self._a["c_kv"] = self.coef[2] * self.roof.kv_s(1.0)

    @property
    def c_kv(self) -> float:
        """Seconds per KV token attended to."""
        c: float = self._a["c_kv"]
        return c

    def decode_base(self, batch: int) -> float:
        """A(B): the part of a decode step that does not depend on the KV attended to."""
        a = self._a.get(batch)
        if a is None:
            g, aw, _, ac, _, ps = self.coef
            a = self._a[batch] = g + aw * self.roof.weight_s(batch) + ac * self.roof.compute_s(batch) + ps * batch
        return a

    def step(self, decode: int, kv_tokens: float, prefill_tokens: int = 0, prefill_batch: bool = False) -> float:
        """One forward: ``decode`` requests decoding, ``prefill_tokens`` new prompt tokens, ``kv_tokens`` attended."""
        t = self.decode_base(decode + prefill_tokens) + self.c_kv * kv_tokens - self.coef[5] * prefill_tokens
        if prefill_batch:
            t += self.coef[4]
        return max(t, 1e-6)

    def span(self, batch: int, kv0: float, n: int) -> float:
        """Seconds of ``n`` decode steps of ``batch`` requests starting from ``kv0`` tokens in flight."""
        if n <= 0:
            return 0.0
        a = self._a.get(batch)
        if a is None:
            a = self.decode_base(batch)
        t = n * a + self._a["c_kv"] * (n * kv0 + batch * n * (n - 1) / 2)
        return t if t > n * 1e-6 else n * 1e-6

    def steps_within(self, batch: int, kv0: float, dt: float) -> int:
        """The most decode steps whose total time is <= dt."""
        if dt <= 0:
            return 0
        a = self.c_kv * batch / 2
        b = max(self.decode_base(batch), 1e-6) + self.c_kv * kv0 - a
        if a <= 0:
            n = int(dt / b)
        else:
            n = int((-b + math.sqrt(b * b + 4 * a * dt)) / (2 * a))
        while n > 0 and self.span(batch, kv0, n) > dt:
            n -= 1
        while self.span(batch, kv0, n + 1) <= dt:
            n += 1
        return n

    def to_dict(self) -> dict:
        return {"source": self.source, "coefficients": dict(zip(NAMES, (round(c, 6) for c in self.coef), strict=True)),
                "roofline": self.roof.summary()}
