"""Rotary-embedding caches an engine builds at model construction (not in the checkpoint).

Both engines cache one ``cos_sin_cache`` of [rows, rotary_dim] per distinct RoPE configuration (``get_rope``
keeps instances in ``_ROPE_DICT``, so all layers share one). Rows (SGLang and vLLM
``layers/rotary_embedding``): ``max_position_embeddings`` for plain, llama3, linear and dynamic scaling;
``original_max_position_embeddings × factor`` for YaRN and DeepSeek-YaRN (``t = arange(max_pos * scaling)``);
Phi-3 LongRoPE keeps a short and a long cache. The element type is engine-specific (see the engines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan import validate


@dataclass(frozen=True)
class RopeCache:
    rows: int
    rotary_dim: int
    kind: str  # "default", "llama3", "yarn", "deepseek_yarn", "longrope", ...


def _params(c: dict[str, Any]) -> dict[str, Any]:
    rs = c.get("rope_scaling") or c.get("rope_parameters") or {}
    return rs if isinstance(rs, dict) else {}


HINT = "fix config.json (kvplan reads it as the engine would)"


def _tokens(key: str, value: Any) -> int:
    """A position count from config.json (validate: a whole number in 1..2^31)."""
    return int(validate.count(f"config.json {key}", value, 1, validate.MAX_TOKENS, HINT))


def _factor(value: Any) -> float:
    """A RoPE scaling factor from config.json: finite, > 0, at most 1,024 (no released model comes near)."""
    return float(validate.number("config.json rope_scaling.factor", value, lo=0.0, hi=1024.0, lo_open=True,
                                 hint=HINT))


def rope_caches(spec) -> list[RopeCache]:
    """The distinct RoPE caches of the language model (MLA: one of qk_rope_head_dim)."""
    from kvplan.models.synth_parts import text_config

    c = text_config(dict(spec.config or {}))
    if spec.architecture in ("GPT2LMHeadModel", "OPTForCausalLM", "BloomForCausalLM", "GPTBigCodeForCausalLM") \
            or (spec.model_type == "falcon" and c.get("alibi")):
        return []  # learned or ALiBi positions
    rs = _params(c)
    kind = str(rs.get("rope_type") or rs.get("type") or "default")
    max_pos = _tokens("max_position_embeddings", c.get("max_position_embeddings") or c.get("n_positions")
                      or spec.context_len or 2048)
    if spec.is_mla:
        rot = spec.qk_rope_head_dim
        if rs and rs.get("factor"):
            orig = _tokens("rope_scaling.original_max_position_embeddings",
                           rs.get("original_max_position_embeddings") or 4096)
            return [RopeCache(int(orig * _factor(rs["factor"])), rot, "deepseek_yarn")]
        return [RopeCache(max_pos, rot, "default")]
    hd = spec.head_dim
    prf = c.get("partial_rotary_factor") or c.get("rotary_pct")
    if c.get("rotary_dim"):
        rot = int(validate.count("config.json rotary_dim", c["rotary_dim"], 1, 1 << 16, HINT))
    elif prf:
        rot = int(hd * float(validate.number("config.json partial_rotary_factor", prf, lo=0.0, hi=1.0, lo_open=True,
                                             hint=HINT)))
    else:
        rot = hd
    if kind in ("yarn",) and rs.get("factor"):
        orig = _tokens("rope_scaling.original_max_position_embeddings",
                       rs.get("original_max_position_embeddings") or max_pos)
        out = [RopeCache(int(orig * _factor(rs["factor"])), rot, "yarn")]
    elif kind in ("longrope", "su") and rs.get("long_factor"):
        orig = _tokens("original_max_position_embeddings", c.get("original_max_position_embeddings")
                       or rs.get("original_max_position_embeddings") or 4096)
        out = [RopeCache(orig + max_pos, rot, "longrope")]
    elif kind == "dynamic" and rs.get("factor"):
        out = [RopeCache(int(max_pos * _factor(rs["factor"])), rot, "dynamic")]
    else:
        out = [RopeCache(max_pos, rot, kind)]
    if spec.model_type in ("gemma3", "gemma3_text"):
        out.append(RopeCache(max_pos, rot, "local"))  # Gemma 3: a second (local, base 10k) rotary instance
    return out
