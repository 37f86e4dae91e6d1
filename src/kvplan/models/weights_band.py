"""How far a per-rank weights figure can be off, for the error band of a preflight plan.

``WeightsPlan`` carries the figure an engine plans with and its (low, high) range:

* given (``--weights-gib``, a log's figure): exact, the range collapses;
* tensors from the checkpoint's safetensors headers: the tensors are exact; what a rank gains while loading
  without a tensor behind it (the load context, ``engines/sglang/load_calibration.py``: +0.05 to +0.20 GiB on
  the logs read there) is not, so +-``CONTEXT_BAND_GIB``;
* tensors synthesized from config.json (``models.synth``): the tensor list matches the headers name by name on
  every tiny checkpoint (tests/weights/test_synth.py), but a real checkpoint can carry parts config.json does not
  announce (quantization scales, extra heads, tied/untied embeddings): +-``SYNTH_BAND_FRACTION`` of the tensors
  on top of the load context. On 24 real launches with a logged weights figure (tests/data/preflight and
  ../shared/logcorpus, both engines, CUDA and ROCm) the synthesized per-rank weights were within 0.15 GiB + 1.0 %
  of the log on all (largest: Gemma-3-27B on MI300X -0.63 GiB, -1.2 %; QwQ-32B TP4 +0.26 GiB; Kimi-K2.5 TP8 on
  MI355X -0.45 GiB) but two whose logs count more than weights (a negative-pool DP8 launch, a 4060 at its limit).

Those hand-read spreads are the fallback: an engine passes ``observed_fraction`` (``engines.spreads``, the 90 %
quantile of the weights' error on the corpus logs, kept in ``engines/spreads.json``) when it has enough logs, and
``MODEL_RESIDUAL_FRACTION`` gives way to the ``residual`` spread there in the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.units import GiB

CONTEXT_BAND_GIB = 0.15  # load-context residuals 0.05-0.20 GiB (engines/sglang/load_calibration.py sources)
SYNTH_BAND_FRACTION = 0.01
# What the term-by-term model leaves unexplained even when every term is at its value: the KV memory of launches
# whose logged inputs (free memory, weights) kvplan reproduces still differs from the log by up to ~1.5 % (allocator
# rounding, per-rank spread: the eight ranks of one vLLM TP8 launch logged 55.62-56.08 GiB). Added in quadrature
# to the inputs' spreads, as a fraction of the KV memory. The fallback of engines.spreads ``residual`` (< 3 logs).
MODEL_RESIDUAL_FRACTION = 0.015


@dataclass(frozen=True)
class WeightsPlan:
    """Per-rank weight bytes an engine plans with, the assumptions behind them and their range."""

    bytes: int
    notes: tuple[str, ...]
    low_bytes: int
    high_bytes: int

    @property
    def exact(self) -> bool:
        return self.low_bytes == self.high_bytes

    @classmethod
    def given(cls, nbytes: int, notes: tuple[str, ...]) -> WeightsPlan:
        return cls(nbytes, notes, nbytes, nbytes)

    @classmethod
    def estimated(cls, nbytes: int, notes: tuple[str, ...], tensors_exact: bool,
                  observed_fraction: float | None = None) -> WeightsPlan:
        """± ``observed_fraction`` of the bytes when the engine has one from real logs (``engines.spreads``
        ``weights``: the quantile of |error| over the corpus logs, estimates from config.json, so an upper bound
        for tensors read from headers too), else the hand-read ``CONTEXT_BAND_GIB`` (+ ``SYNTH_BAND_FRACTION``)."""
        if observed_fraction is not None:
            spread = int(observed_fraction * nbytes)
        else:
            spread = int(CONTEXT_BAND_GIB * GiB) + (0 if tensors_exact else int(SYNTH_BAND_FRACTION * nbytes))
        return cls(nbytes, notes, max(0, nbytes - spread), nbytes + spread)
