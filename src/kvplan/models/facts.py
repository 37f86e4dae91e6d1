"""What depends only on the model, computed once per model and process (``ModelSpec.identity`` is the key: every
field but the labels, and config.json as canonical JSON).

* ``synthesized(spec, quant)``: the checkpoint's tensor groups synthesized from config.json (``models.synth``) and
  the synthesis notes, per quantization (None: the config's own ``quantization_config``; ``{}``: none);
* ``model_facts(spec)``: parameter counts by module group (the unquantized synthesis, MTP layers apart), the
  language model's parameter count and the attention's share of it;
* ``checkpoint_bytes(spec, quant)``: the whole checkpoint's bytes (all ranks together) the synthesis implies.

    param_breakdown[part] = Σ_groups of the part  numel(group) × count(group)      (part "mtp": layers ≥ num_layers)
    param_count = Σ param_breakdown over parts but vision, projector and mtp
    checkpoint_bytes = Σ_groups ceil(numel × bits(dtype) / 8) × count
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvplan.models.memo import Memo
from kvplan.models.tensors import TensorGroup

_FACTS: Memo[ModelFacts] = Memo("model facts", 64)
_BYTES: Memo[int] = Memo("checkpoint bytes", 64)


@dataclass(frozen=True)
class ModelFacts:
    """Parameter counts of one model (``ModelSpec.param_breakdown`` / ``param_count`` /
    ``attention_weight_fraction`` read them)."""

    param_breakdown: tuple[tuple[str, int], ...]  # (part, parameters) in the order the parts first appear
    param_count: int  # language model: every part but vision, projector and mtp
    attention_weight_fraction: float  # attention / all parts


def synthesized(spec: Any, quant: dict[str, Any] | None = None) -> tuple[tuple[TensorGroup, ...], tuple[str, ...]]:
    """(tensor groups, synthesis notes) of ``spec``'s checkpoint, once per model and quantization
    (``models.synth.synthesized``)."""
    from kvplan.models import synth

    return synth.synthesized(spec, quant)


def _facts(spec: Any) -> ModelFacts:
    from kvplan.models.placement import role_of

    out: dict[str, int] = {}
    for g in synthesized(spec, {})[0]:
        part = "mtp" if g.layer is not None and g.layer >= spec.num_layers else role_of(g).group
        out[part] = out.get(part, 0) + g.one.numel * g.count
    total = sum(out.values())
    return ModelFacts(tuple(out.items()), sum(v for k, v in out.items() if k not in ("vision", "projector", "mtp")),
                      out.get("attention", 0) / total if total else 0.0)


def model_facts(spec: Any) -> ModelFacts:
    """The parameter counts of ``spec``, once per model."""
    return _FACTS.get(spec.identity, lambda: _facts(spec))


def checkpoint_bytes(spec: Any, quant: dict[str, Any] | None) -> int:
    """Whole-checkpoint bytes of the synthesis with ``quant`` (None counts as no quantization), once per model."""
    q = quant if quant is not None else {}
    key = (spec.identity, json.dumps(q, sort_keys=True, default=str))
    return _BYTES.get(key, lambda: sum(g.nbytes for g in synthesized(spec, q)[0]))
