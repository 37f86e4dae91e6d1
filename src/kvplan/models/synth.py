"""A checkpoint's tensors from config.json alone (Hugging Face names, whole, as stored on disk).

Used when no safetensors files are at hand. Shapes follow each architecture's transformers modeling file
(``modeling_<type>.py``: which projections exist, which carry biases, which norms); the storage format of each
linear follows ``models.quantfmt``. Layer numbers appear as ``{L}``, expert numbers as ``#`` (see
``tensors.TensorGroup``). MTP/NextN layers that ship in a checkpoint are included (engines drop them).

Families: Llama-like dense and MoE decoders here (Llama, Mistral, Qwen2/3, Gemma 1-3, Phi-3, InternLM2, GLM-4,
Granite, OLMo, Cohere, EXAONE, Starcoder2, Mixtral, Qwen2/3-MoE, GLM-4-MoE, gpt-oss, Qwen3-Next);
``synth_mla`` (DeepSeek-V2/V3, Kimi-K2/K2.5), ``synth_legacy`` (GPT-2, OPT, GPT-NeoX, Falcon, BLOOM, Phi,
GPT-BigCode, GPT-J, StableLM), ``synth_vision`` (vision towers, estimated).
"""

from __future__ import annotations

import json
from typing import Any

from kvplan.models.memo import Memo
from kvplan.models.quantfmt import scheme_from_config, st_dtype
from kvplan.models.synth_parts import Builder, _decoder, quant_config_of, text_config
from kvplan.models.tensors import TensorGroup, TensorInfo


def synthesize_groups(spec, quant_config: dict[str, Any] | None = None) -> list[TensorGroup]:
    """Tensor groups of the checkpoint described by ``spec`` (its raw config in ``spec.config``)."""
    return list(synthesized(spec, quant_config)[0])


def synthesis_notes(spec, quant_config: dict[str, Any] | None = None) -> tuple[str, ...]:
    """What the synthesis had to estimate (vision towers, ...), for the plan's assumptions."""
    return synthesized(spec, quant_config)[1]


def synthesized(spec, quant_config: dict[str, Any] | None = None) -> tuple[tuple[TensorGroup, ...], tuple[str, ...]]:
    """(tensor groups, notes) of ``spec``'s checkpoint (``quant_config`` None: the config's own
    quantization_config; ``{}``: unquantized), built once per model and quantization: the key is
    ``ModelSpec.identity`` and the quantization used as canonical JSON."""
    q = quant_config if quant_config is not None else quant_config_of(dict(spec.config or {}))
    key = (spec.identity, json.dumps(q, sort_keys=True, default=str))
    return _SYNTH.get(key, lambda: _build(spec, q, dict(spec.config or {})))


_SYNTH: Memo[tuple[tuple[TensorGroup, ...], tuple[str, ...]]] = Memo("synthesized tensors", 32)


def _synthesize(spec, quant_config: dict[str, Any] | None) -> tuple[tuple[TensorGroup, ...], tuple[str, ...]]:
    """The synthesis without the memo."""
    top = dict(spec.config or {})
    return _build(spec, quant_config if quant_config is not None else quant_config_of(top), top)


def _build(spec, q, top: dict[str, Any]) -> tuple[tuple[TensorGroup, ...], tuple[str, ...]]:
    from kvplan.models import synth_legacy, synth_mla, synth_vision

    c = text_config(top)
    b = Builder(scheme_from_config(q, spec.dtype), st_dtype(spec.dtype))
    if spec.is_mla:
        synth_mla.build(b, spec, c, top)
    elif synth_legacy.handles(spec.architecture):
        synth_legacy.build(b, spec, c, top)
    else:
        if c is not top and spec.architecture == "Gemma3ForConditionalGeneration":
            b.prefix = "language_model."
        _decoder(b, spec, c, top)
        b.prefix = ""
    notes = synth_vision.build(b, spec, top)
    return tuple(b.groups), tuple(notes)


def synthesize_tensors(spec, quant_config: dict[str, Any] | None = None) -> list[TensorInfo]:
    """The checkpoint's tensors (HF names, whole, as stored) from config.json alone."""
    out: list[TensorInfo] = []
    for g in synthesize_groups(spec, quant_config):
        out.extend(g.expand())
    return out
