"""Speculative-decoding draft heads, engine-neutral: the draft's config.json (a local directory or file, the HF
cache, or ``drafts.json``) and the weights and KV cell of one rank of a Llama-style EAGLE-3 head.

The head, as both engines build it (https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/models/
llama_eagle3.py::LlamaForCausalLMEagle3, https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/model_executor/
models/llama_eagle3.py::Eagle3LlamaForCausalLM): one decoder layer whose qkv_proj reads 2H (embedding ‖ hidden),
an MLP, ``fc`` [H, 3H_target] (a plain Linear: whole on every rank), a ParallelLMHead over ``draft_vocab_size``
(vocab padded to 64, split over TP; absent when ``draft_vocab_size`` is not set: the target's head is used), four
RMSNorms and the ``d2t`` map (int64 per draft token). Its embed_tokens is replaced by the target's after loading.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError


@dataclass(frozen=True)
class DraftConfig:
    name: str
    config: dict[str, Any]
    source: str  # where the config was read


@lru_cache(maxsize=1)
def _entries() -> tuple[dict[str, Any], ...]:
    with open(Path(__file__).with_name("drafts.json"), encoding="utf-8") as f:
        return tuple(json.load(f)["drafts"])


def _catalog(name: str) -> dict[str, Any] | None:
    key = name.strip().rstrip("/").lower()
    for e in _entries():
        if key == e["id"].lower() or key in (a.lower() for a in e.get("aliases", ())):
            return e
    return None


def draft_config(path: str | None, flag: str) -> DraftConfig:
    """The draft's config: ``path`` as a local checkpoint directory or config.json, then the HF cache, then the
    drafts catalog; a KvplanError naming the missing config otherwise (kvplan never downloads)."""
    from kvplan.models.catalog import find_in_hf_cache
    from kvplan.models.config import read_config_file

    if not path:
        raise KvplanError(f"{flag} is not given: the draft model's config.json is the missing figure",
                          f"add {flag} with a local directory holding the draft's config.json")
    p = Path(os.path.expanduser(path))
    try:
        local = stat.S_ISDIR(p.stat().st_mode) or p.suffix == ".json"
    except OSError:
        local = False
    if local:
        cfg, cfg_path = read_config_file(p)
        return DraftConfig(path, cfg, str(cfg_path))
    cached = find_in_hf_cache(path)
    if cached is not None:
        cfg, cfg_path = read_config_file(cached)
        return DraftConfig(path, cfg, str(cfg_path))
    e = _catalog(path)
    if e is not None:
        return DraftConfig(path, dict(e["config"]), f"kvplan drafts catalog: {e['source']}")
    raise KvplanError(f"draft model {path!r}: its config.json (layers, hidden size, draft vocabulary) is not at hand "
                      "(not a local directory, not in the HF cache, not in kvplan's drafts catalog)",
                      f"pass {flag} as a local directory holding the draft's config.json")


def _int(cfg: dict[str, Any], key: str, name: str) -> int:
    v = cfg.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise KvplanError(f"draft model {name}: config.json has no valid {key!r} ({v!r})",
                          "pass a draft directory whose config.json has it")
    return v


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class DraftHead:
    """One rank's share of an EAGLE-3 head."""

    weights_bytes: int
    parts: dict[str, int]
    layers: int  # draft attention layers (each one KV layer)
    kv_heads_per_rank: int
    head_dim: int

    def kv_bytes_per_token(self, kv_dtype_bytes: int) -> int:
        return self.layers * self.kv_heads_per_rank * 2 * self.head_dim * kv_dtype_bytes


def eagle3_head(d: DraftConfig, tp: int, target_hidden: int, dtype_bytes: int = 2) -> DraftHead:
    """Weights per rank of a Llama EAGLE-3 head at tensor parallel ``tp`` (module docstring)."""
    c = d.config
    h = _int(c, "hidden_size", d.name)
    n_heads, inter = _int(c, "num_attention_heads", d.name), _int(c, "intermediate_size", d.name)
    kv = int(c.get("num_key_value_heads") or n_heads)
    hd = int(c.get("head_dim") or h // n_heads)
    layers = _int(c, "num_hidden_layers", d.name)
    th = int(c.get("target_hidden_size") or target_hidden or h)
    q_r, kv_r = n_heads // tp, max(1, kv // tp)
    per_layer = {"qkv_proj": 2 * h * (q_r + 2 * kv_r) * hd, "o_proj": q_r * hd * h,
                 "gate_up_proj": h * 2 * cdiv(inter, tp), "down_proj": cdiv(inter, tp) * h}
    parts = {k: v * layers * dtype_bytes for k, v in per_layer.items()}
    parts["fc"] = 3 * th * h * dtype_bytes + (h * dtype_bytes if c.get("bias") else 0)
    dv = c.get("draft_vocab_size")
    if c.get("tie_word_embeddings"):
        vocab = int(c.get("vocab_size") or 0)
    else:
        vocab = int(dv) if dv else 0  # None: the target's head is loaded into it (shared)
    parts["lm_head"] = cdiv(cdiv(vocab, 64) * 64, tp) * h * dtype_bytes
    parts["norms"] = (3 * layers + 1) * h * dtype_bytes
    parts["d2t"] = int(dv or 0) * 8
    return DraftHead(sum(parts.values()), parts, layers, kv_r, hd)
