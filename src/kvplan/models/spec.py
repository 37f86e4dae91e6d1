"""ModelSpec: the facts about a checkpoint that decide how much KV each token costs.

Built only from config.json read as JSON (``models.config``) or from the embedded catalog; no model code
is ever imported. Layer kinds follow the engines' own vocabulary: ``full`` attention, ``swa`` (sliding
window) and ``linear`` (Mamba2 / gated delta net state instead of a KV cache).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

DTYPE_BYTES = {
    "float32": 4, "float": 4, "fp32": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
}
# fields that only label a spec: nothing computed from the model reads them (``ModelSpec.identity`` leaves them out)
LABELS = ("name", "notes", "source", "weight_bytes", "weight_bytes_source")


@dataclass(frozen=True)
class LinearAttnSpec:
    """Per-layer recurrent state of a hybrid-linear layer, unsharded (whole model, one request).

    SGLang shards both shapes by attention-TP heads (``Mamba2CacheParams`` / ``Mamba2StateShape``).
    """

    kind: str  # "gdn" (Qwen3-Next gated delta net) or "mamba2"
    conv_dim: int  # channels of the causal conv state
    conv_kernel: int  # state keeps conv_kernel - 1 columns
    num_heads: int  # value heads (GDN) / SSM heads (Mamba2): the TP-sharded axis of the temporal state
    state_dims: tuple[int, int]  # temporal state per head: (head_k_dim, head_v_dim) or (head_dim, d_state)

    def per_rank_bytes(self, attn_tp: int, conv_bytes: int = 2, ssm_bytes: int = 4) -> int:
        """Bytes of one request's state for one layer on one attention-TP rank."""
        conv = (self.conv_dim // attn_tp) * (self.conv_kernel - 1) * conv_bytes
        ssm = (self.num_heads // attn_tp) * self.state_dims[0] * self.state_dims[1] * ssm_bytes
        return conv + ssm


@dataclass(frozen=True)
class MoESpec:
    num_experts: int
    experts_per_tok: int
    moe_intermediate_size: int
    shared_intermediate_size: int  # total width of shared experts (0 if none)
    moe_layers: int  # how many decoder layers are MoE


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one checkpoint (the text model for multimodal ones)."""

    name: str
    architecture: str
    model_type: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    layer_kinds: tuple[str, ...]
    context_len: int
    dtype: str = "bfloat16"
    attention: str = "mha"  # "mha" (covers GQA/MQA) or "mla"
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    q_lora_rank: int = 0
    sliding_window: int | None = None
    intermediate_size: int = 0
    moe: MoESpec | None = None
    linear: LinearAttnSpec | None = None
    tie_word_embeddings: bool = False
    quant_method: str | None = None
    kv_cache_fp8: bool = False  # checkpoint declares kv_cache_quant_algo FP8
    is_multimodal: bool = False
    vit_layers: int | None = None
    vit_hidden: int | None = None
    num_nextn_predict_layers: int = 0
    tokenizer_max_len: int | None = None  # tokenizer_config.json model_max_length (vLLM caps max_model_len by it)
    weight_bytes: int | None = None  # whole checkpoint, all ranks together
    weight_bytes_source: str | None = None
    source: str | None = None
    notes: tuple[str, ...] = field(default=())
    # the config.json it came from (read as data): what models.synth needs beyond the fields above
    config: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    # ---- derived -------------------------------------------------------------------------------
    @property
    def is_mla(self) -> bool:
        return self.attention == "mla"

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 2)

    @cached_property
    def n_full_layers(self) -> int:
        return sum(1 for k in self.layer_kinds if k == "full")

    @cached_property
    def n_swa_layers(self) -> int:
        return sum(1 for k in self.layer_kinds if k == "swa")

    @cached_property
    def n_linear_layers(self) -> int:
        return sum(1 for k in self.layer_kinds if k == "linear")

    @property
    def mla_kv_dim(self) -> int:
        """Width of one MLA latent row: kv_lora_rank + qk_rope_head_dim."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @cached_property
    def attention_kind(self) -> str:
        """Human label: MLA, MHA, MQA or GQA (plus hybrids)."""
        if self.is_mla:
            base = "MLA"
        elif self.num_kv_heads == self.num_attention_heads:
            base = "MHA"
        elif self.num_kv_heads == 1:
            base = "MQA"
        else:
            base = "GQA"
        if self.n_swa_layers:
            base += f"+SWA({self.n_swa_layers}/{self.num_layers})"
        if self.n_linear_layers:
            kind = self.linear.kind.upper() if self.linear else "linear"
            base += f"+{kind}({self.n_linear_layers}/{self.num_layers})"
        return base

    def summary(self) -> dict:
        """The facts a Plan reports about the model (JSON-ready)."""
        return {"name": self.name, "architecture": self.architecture, "attention": self.attention_kind,
                "layers": self.num_layers, "kv_heads": self.num_kv_heads, "head_dim": self.head_dim,
                "kv_lora_rank": self.kv_lora_rank or None, "qk_rope_head_dim": self.qk_rope_head_dim or None,
                "is_mla": self.is_mla, "is_moe": self.moe is not None, "context_len": self.context_len,
                "weight_bytes": self.weight_bytes, "source": self.source, "notes": self.notes}

    # ---- what the model's facts are keyed by -------------------------------------------------------------
    @cached_property
    def identity(self) -> tuple:
        """Everything computed from the model depends on: every field but the labels (``LABELS``) and config.json as
        canonical JSON. The key of the process-wide model memos (``models.facts``, ``models.memo``); computed once
        per spec (its config is read as data and never changed)."""
        import json

        own = tuple(getattr(self, f.name) for f in fields(self) if f.name not in LABELS and f.name != "config")
        return own, json.dumps(self.config, sort_keys=True, default=str)

    # ---- parameters: from the tensors models.synth derives from config.json (one mechanism) ----
    def param_breakdown(self) -> dict[str, int]:
        """Parameter counts by module group (embedding, lm_head, attention, mlp, experts, shared_experts,
        router, norms, linear_attn, vision, projector, mtp), unquantized, from ``models.synth`` (once per model:
        ``models.facts``)."""
        from kvplan.models.facts import model_facts

        return dict(model_facts(self).param_breakdown)

    @property
    def param_count(self) -> int:
        """Parameters of the language model (vision towers and MTP layers excluded)."""
        from kvplan.models.facts import model_facts

        return model_facts(self).param_count

    @property
    def attention_weight_fraction(self) -> float:
        """Share of the weights in attention (replicated across DP-attention groups in SGLang)."""
        from kvplan.models.facts import model_facts

        return model_facts(self).attention_weight_fraction
