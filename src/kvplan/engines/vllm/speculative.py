"""vLLM speculative decoding (``--speculative-config``) on the V1 engine: the drafter's weights and its KV layers.

Read from the 0.11.0 wheel (https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/...; 0.10.2 builds the same eagle3
head and shares the embedding the same way; its lm_head is always the head's own):

- ``config/speculative.py::SpeculativeConfig``: ``method`` (an "eagle3" in the draft's name makes it eagle3),
  ``model``, ``num_speculative_tokens``; the draft runs at the target's tensor parallel size.
- ``v1/spec_decode/eagle.py::EagleProposer.load_model``: the head is loaded with the target (its memory is part of
  the model memory the profile subtracts); its embed_tokens is replaced by the target's when the shapes match; an
  eagle3 head keeps its own lm_head over ``draft_vocab_size`` (``models/llama_eagle3.py``, ``models.drafts``).
- ``v1/worker/gpu_model_runner.py::GPUModelRunner.get_kv_cache_spec``: every ``Attention`` layer of the static
  forward context, the drafter's included, gets a KV spec; the drafter's layers share the block pool, so a block
  costs the target's layers plus the draft's (``v1/core/kv_cache_utils.py::get_kv_cache_config``).
- ``v1/spec_decode/eagle.py::EagleProposer.__init__``: persistent buffers of max_num_batched_tokens rows
  (input_ids, positions, arange, hidden_states and inputs_embeds of the draft's hidden size), made with the model
  runner, before the profile.
- The profile run also runs the drafter (``_dummy_run`` → ``drafter.dummy_run``): a one-layer head, its activations
  below the target's peak (not added); its CUDA graphs are captured after the KV cache, outside the budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from kvplan.engines.versions import Version
from kvplan.errors import KvplanError

SRC = "https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/spec_decode/eagle.py::EagleProposer.load_model"
KV_SRC = "https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_model_runner.py::get_kv_cache_spec"
BUF_SRC = "https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/spec_decode/eagle.py::EagleProposer.__init__"


@dataclass(frozen=True)
class VllmDraft:
    method: str
    num_speculative_tokens: int
    weights_bytes: int  # per rank
    layers: int  # draft attention layers (each one more KV layer in the block pool)
    layer_token_bytes: int  # KV bytes per token of one draft layer on a rank
    notes: tuple[str, ...]
    buffers_bytes: int = 0  # EagleProposer's persistent buffers (before the profile)


def parse_config(text: str | None) -> dict:
    if not text:
        return {}
    try:
        d = json.loads(text)
    except ValueError:
        raise KvplanError(f"--speculative-config {text[:60]!r} is not JSON", "pass a JSON object") from None
    if not isinstance(d, dict):
        raise KvplanError("--speculative-config is not a JSON object", "pass e.g. '{\"method\": \"eagle3\", ...}'")
    return d


def method_of(cfg: dict) -> str:
    m = str(cfg.get("method") or "").lower()
    if not m and "eagle3" in str(cfg.get("model") or "").lower():
        m = "eagle3"
    return m


def modelled(version: str, kind: str, cfg: dict) -> bool:
    """eagle3 and ngram on the V1 engine of the releases read (0.10.2, 0.11.0: the same head and sharing)."""
    v = Version(version)
    return kind != "v0" and Version("0.10.2") <= v < Version("0.12.0") and method_of(cfg) in ("eagle3", "ngram")


def plan_draft(cfg: dict, tp: int, target_hidden: int, dtype_bytes: int, kv_bytes: int,
               version: str = "0.11.0", max_num_batched_tokens: int = 0) -> VllmDraft:
    from kvplan.models.drafts import draft_config, eagle3_head

    method, k = method_of(cfg), int(cfg.get("num_speculative_tokens") or 0)
    if method == "ngram":  # a CPU n-gram matcher: no draft weights, no draft KV
        return VllmDraft(method, k, 0, 0, 0, ("speculative ngram: no draft model (prompt n-gram lookup on the CPU)",))
    d = draft_config(cfg.get("model"), "--speculative-config model")
    head = eagle3_head(d, tp, target_hidden, dtype_bytes)
    if not d.config.get("draft_vocab_size") and Version(version) < Version("0.11.0"):
        # 0.10.2 keeps an eagle3 head's own full-vocabulary lm_head (0.11 shares the target's when shapes match)
        v = int(d.config.get("vocab_size") or 0)
        extra = -(-(-(-v // 64) * 64) // tp) * int(d.config.get("hidden_size") or 0) * dtype_bytes
        head = replace(head, weights_bytes=head.weights_bytes + extra, parts={**head.parts, "lm_head": extra})
    per_layer = head.kv_bytes_per_token(kv_bytes) // head.layers
    # the target's embed_tokens replaces the head's when the shapes match (eagle.py); the lm_head is the head's own
    notes = (f"speculative eagle3: draft {d.name} (config from {d.source}), {k} speculative tokens; head "
             f"{head.weights_bytes / 2**30:.2f} GiB per rank ("
             + ", ".join(f"{p} {b / 2**20:.0f}" for p, b in head.parts.items())
             + f" MiB) loaded with the model; {head.layers} draft KV layer(s) in the block pool ({KV_SRC})",
             "the profile's rejection-sampler dummy run (one draft token per request, "
             "gpu_model_runner.py::_dummy_sampler_run) stays below the sampler's peak: not added")
    # EagleProposer.__init__: input_ids int32, positions int64, arange int32, hidden_states and inputs_embeds
    # [max_num_batched_tokens, draft hidden] in the model dtype (GPUModelRunner.__init__, before the profile)
    h = int(d.config.get("hidden_size") or 0)
    buffers = max_num_batched_tokens * (4 + 8 + 4 + 2 * h * dtype_bytes)
    return VllmDraft(method, k, head.weights_bytes, head.layers, per_layer, notes, buffers)
