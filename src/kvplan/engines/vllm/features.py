"""The vLLM launch features that add memory beside the target model: a speculative drafter (speculative.py) and
LoRA (lora.py): their weights (in the model memory the profile subtracts), the drafter's KV layers (in the block
pool), their plan terms, and what stays unmodelled (the ``unmodeled-memory`` warning)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.args import VLLMArgs
from kvplan.engines.vllm.kvcache import LayerSpec
from kvplan.engines.vllm.lora import SRC as LORA_SRC
from kvplan.engines.vllm.lora import VllmLora, plan_lora
from kvplan.engines.vllm.speculative import BUF_SRC, KV_SRC, SRC, VllmDraft, modelled, parse_config, plan_draft
from kvplan.models.spec import ModelSpec
from kvplan.result import RankTerm, feature_term

SPEC_UNMODELED = "speculative decoding (draft weights and draft KV)"
LORA_UNMODELED = "LoRA buffers"


@dataclass(frozen=True)
class Features:
    draft: VllmDraft | None
    lora: VllmLora | None
    unmodeled: tuple[str, ...]

    @property
    def weights_bytes(self) -> int:
        """Per rank, loaded with the model: the drafter's head and the LoRA buffers."""
        d = self.draft
        return (d.weights_bytes + d.buffers_bytes if d else 0) + (self.lora.gpu_bytes if self.lora else 0)

    @property
    def notes(self) -> tuple[str, ...]:
        return (self.draft.notes if self.draft else ()) + (self.lora.notes if self.lora else ())

    def draft_layers(self, block: int) -> list[LayerSpec]:
        """The drafter's attention layers as KV specs (full attention, its own page size)."""
        d = self.draft
        return [LayerSpec("full", block * d.layer_token_bytes)] * d.layers if d and d.layers else []

    def terms(self, kv_tokens_alloc: int) -> tuple[RankTerm, ...]:
        """``kv_tokens_alloc``: blocks × block size of the pool (the draft's share of it)."""
        out = []
        d, lo = self.draft, self.lora
        if d is not None and d.method != "ngram":
            out.append(feature_term("draft-weights", d.weights_bytes, "per rank",
                                   "model memory (loaded with the target, subtracted before the KV cache)", SRC))
            out.append(feature_term("draft-buffers", d.buffers_bytes, "per rank", "the proposer's persistent "
                                   "buffers (max_num_batched_tokens rows), taken before the profile", BUF_SRC))
            out.append(feature_term("draft-kv-pool", d.layers * d.layer_token_bytes * kv_tokens_alloc, "per rank",
                                   f"inside the block pool: {d.layers} draft layer(s) × {d.layer_token_bytes:,} "
                                   f"B/token in every block; {d.num_speculative_tokens} speculative tokens", KV_SRC))
        if lo is not None:
            out.append(feature_term("lora-buffers", lo.gpu_bytes, "per rank", f"model memory: {lo.max_loras} slots × "
                                   f"rank {lo.max_lora_rank} on every supported module", LORA_SRC))
            out.append(feature_term("lora-cpu-cache", lo.host_bytes, "per rank, host",
                                   "upper bound: max_cpu_loras adapters at the maximum rank", LORA_SRC))
        return tuple(out)


def plan_features(model: ModelSpec, args: VLLMArgs, version: str, kind: str, dtype_bytes: int,
                  kv_bytes: int, max_num_batched_tokens: int) -> Features:
    unmodeled: list[str] = []
    draft = None
    cfg = parse_config(args.speculative_config)
    if cfg:
        if modelled(version, kind, cfg):
            draft = plan_draft(cfg, args.tensor_parallel_size, model.hidden_size, dtype_bytes, kv_bytes, version,
                               max_num_batched_tokens)
        else:
            unmodeled.append(SPEC_UNMODELED)
    lora = None
    if args.enable_lora and not args.no_enable_lora:
        lora = plan_lora(model, args, version, dtype_bytes)  # V0 and V1 build the same buffers (lora.py)
        if lora is None:
            unmodeled.append(LORA_UNMODELED)
    return Features(draft, lora, tuple(unmodeled))
