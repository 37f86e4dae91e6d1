"""Whether vLLM caches a DeepSeek-style model's KV as one MLA latent row, or per head like any other model.

- before 0.7.1 vLLM has no MLA: ``config.py::ModelConfig.get_head_size`` returns 256 for deepseek_v2/v3 (the
  192-wide q/k head padded for FlashAttention) and the KV heads are config.json's ``num_key_value_heads``
  (https://github.com/vllm-project/vllm/blob/v0.6.6.post1/vllm/config.py);
- from 0.7.1 ``ModelConfig.use_mla`` = ``is_deepseek_mla and not VLLM_MLA_DISABLE``; with MLA disabled the head
  size is ``qk_nope_head_dim + qk_rope_head_dim`` (https://github.com/vllm-project/vllm/blob/v0.7.3/vllm/config.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kvplan.engines.versions import Version
from kvplan.models.spec import ModelSpec


@dataclass(frozen=True)
class KvHeads:
    """How one attention layer's KV is cached on a rank."""

    mla: bool  # one latent row per token (kv_lora_rank + qk_rope_head_dim), replicated on every TP rank
    head_size: int  # K and V head size when not MLA (V is padded to K's size in vLLM's cache)
    note: str | None = None
    total_heads: int = 1  # KV heads before TP when not MLA (ModelConfig.get_total_num_kv_heads)


def _config_kv_heads(model: ModelSpec) -> int:
    """config.json's num_key_value_heads (what get_total_num_kv_heads returns), else the attention heads."""
    cfg = model.config or {}
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    n = text.get("num_key_value_heads") if isinstance(text, dict) else None
    return int(n) if isinstance(n, int) and not isinstance(n, bool) and n > 0 else model.num_attention_heads


def kv_heads(model: ModelSpec, version: str, env: Mapping[str, str]) -> KvHeads:
    if not model.is_mla:
        return KvHeads(False, model.head_dim, total_heads=model.num_kv_heads)
    heads = _config_kv_heads(model)
    if Version(version) < Version("0.7.1"):
        return KvHeads(False, 256, f"vLLM {version} has no MLA: DeepSeek KV is cached per head "
                                   f"({heads} KV heads, head size 192 padded to 256; "
                                   "config.py::ModelConfig.get_head_size)", heads)
    if str(env.get("VLLM_MLA_DISABLE", "")).strip() not in ("", "0", "false", "False"):
        hs = model.qk_nope_head_dim + model.qk_rope_head_dim
        return KvHeads(False, hs, f"VLLM_MLA_DISABLE: KV cached per head ({heads} KV heads, head "
                                  f"size {hs} = qk_nope_head_dim + qk_rope_head_dim)", heads)
    return KvHeads(True, model.mla_kv_dim)
