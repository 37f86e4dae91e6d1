"""vLLM LoRA: the stacked LoRA buffers every wrapped layer preallocates, and the CPU adapter cache.

Read from the 0.11.0 wheel (https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/...; 0.10.2 allocates the same
buffers, 0.8.5 too from ``lora/layers.py``). The V0 engine, read in the 0.8.0 and 0.8.2 wheels (identical there):
``worker/model_runner.py::GPUModelRunnerBase.load_model`` builds the same wrappers (``create_lora_manager``) inside
the ``DeviceMemoryProfiler`` that measures the model's memory, and ``_dummy_run``'s warm-up adapters (rank 8) are
created on the CPU (``lora/models.py::create_dummy_lora``, device "cpu"), so the GPU holds the same stacked buffers
(https://github.com/vllm-project/vllm/blob/v0.8.2/vllm/worker/model_runner.py):

- ``v1/worker/gpu_model_runner.py::GPUModelRunner.load_model`` → ``load_lora_model``: the LoRA wrappers are
  built with the model, so their buffers are part of the model memory the profile subtracts before the KV cache.
- ``lora/models.py::LoRAModelManager._create_lora_modules``: every supported module of the model is wrapped
  (``max_loras`` slots of ``max_lora_rank``), whichever modules the adapters target.
- ``lora/layers/base_linear.py::BaseLinearLayerWithLoRA.create_lora_weights`` and
  ``column_parallel_linear.py``: per slice, A ``(max_loras, 1, rank, input_size)`` and B ``(max_loras, 1,
  output_size, rank)`` in ``lora_dtype`` (auto: the model dtype); qkv_proj has 3 slices (q, k, v), gate_up_proj 2;
  column-parallel layers hold their output shard in B, row-parallel (o_proj, down_proj) their input shard in A.
- ``lora/layers/vocal_parallel_embedding.py`` and ``logits_processor.py`` (models with ``embedding_modules``,
  Llama/Mistral): embeddings ``(max_loras, extra_vocab, H)``, A ``(max_loras, vocab + extra_vocab, rank)``,
  B ``(max_loras, 1, H, rank)``; logits A ``(max_loras, 1, rank, H)``, B ``(max_loras, 1, vocab_padded, rank)``
  (vocab + extra_vocab padded to 256) and ``(max_loras, extra_vocab, H)``; ``lora_extra_vocab_size`` 256. The base
  model also grows: embed_tokens by extra_vocab × max_loras rows, lm_head by extra_vocab rows
  (``models/llama.py``).
- ``config/lora.py::LoRAConfig``: ``max_cpu_loras`` defaults to ``max_loras``: adapters kept on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.versions import Version
from kvplan.engines.vllm.args import VLLMArgs
from kvplan.models.spec import ModelSpec

SRC = "https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/lora/layers/base_linear.py::create_lora_weights"
EMBED_ARCHS = ("LlamaForCausalLM", "MistralForCausalLM")  # embedding_modules in models/llama.py
EXTRA_VOCAB = 256  # config/lora.py::LoRAConfig.lora_extra_vocab_size
VOCAB_PAD = 256  # platforms/cuda: get_lora_vocab_padding_size


@dataclass(frozen=True)
class VllmLora:
    gpu_bytes: int  # per rank: LoRA buffers + the base model's extra vocabulary rows
    host_bytes: int  # per rank: upper bound of the CPU adapter cache (max_cpu_loras adapters at max rank)
    max_loras: int
    max_lora_rank: int
    notes: tuple[str, ...]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def modelled(version: str, model: ModelSpec) -> bool:
    """The releases read (0.8.0, 0.8.2 V0; 0.8.5, 0.10.2, 0.11.0: the same buffers, built in ``load_model`` of either
    engine) and the layer kinds sized here (dense decoder layers, no MLA / vision / linear attention)."""
    v = Version(version)
    return Version("0.8.0") <= v < Version("0.12.0") and not (
        model.is_mla or model.is_multimodal or model.n_linear_layers or model.moe is not None)


def _buffers(model: ModelSpec, n: int, r: int, tp: int, elem: int, dtype_bytes: int) -> tuple[int, int]:
    """(linear, embed/lm_head) bytes of ``n`` slots at rank ``r`` on one rank of ``tp`` (module docstring)."""
    h, hd, inter = model.hidden_size, model.head_dim, model.intermediate_size
    q, kv = model.num_attention_heads * hd // tp, max(1, model.num_kv_heads // tp) * hd
    # per layer: A (n, 1, r, in) per slice, B (n, 1, out, r) per slice
    per_layer = (3 * r * h + (q + 2 * kv) * r  # qkv_proj: column-parallel, 3 slices
                 + r * (model.num_attention_heads * hd // tp) + h * r  # o_proj: row-parallel
                 + 2 * r * h + 2 * _cdiv(inter, tp) * r  # gate_up_proj: 2 slices
                 + r * _cdiv(inter, tp) + h * r)  # down_proj: row-parallel
    linear = n * per_layer * model.num_layers * elem
    if model.architecture not in EMBED_ARCHS:
        return linear, 0
    v = model.vocab_size
    emb = n * EXTRA_VOCAB * h * dtype_bytes + n * (v + EXTRA_VOCAB) * r * elem + n * h * r * elem
    logits = n * r * h * elem + n * _cdiv(v + EXTRA_VOCAB, VOCAB_PAD) * VOCAB_PAD * r * elem \
        + n * EXTRA_VOCAB * h * dtype_bytes
    base = (_cdiv(EXTRA_VOCAB * n, tp) + _cdiv(EXTRA_VOCAB, tp)) * h * dtype_bytes  # the model's extra vocab rows
    return linear, emb + logits + base


def plan_lora(model: ModelSpec, args: VLLMArgs, version: str, dtype_bytes: int) -> VllmLora | None:
    if not args.enable_lora or not modelled(version, model):
        return None
    n, r, tp = args.max_loras or 1, args.max_lora_rank or 16, args.tensor_parallel_size
    elem = 4 if (args.lora_dtype or "auto") in ("float32", "float") else dtype_bytes
    linear, embed = _buffers(model, n, r, tp, elem, dtype_bytes)
    total = linear + embed
    parts = [f"linear {linear / 2**30:.2f} GiB"] + ([f"embed/lm_head {embed / 2**30:.2f} GiB"] if embed else [])
    cpu = args.max_cpu_loras or n
    one = sum(_buffers(model, 1, r, 1, elem, dtype_bytes))  # an adapter is loaded whole on each rank's CPU
    host = cpu * one
    notes = (f"LoRA {total / 2**30:.2f} GiB per rank ({', '.join(parts)}): {n} slots × rank {r}, every supported "
             f"module wrapped ({SRC}); part of the model memory the profile subtracts",
             f"LoRA adapters on the host: up to {cpu} (max_cpu_loras) × {one / 2**30:.2f} GiB per rank "
             "(an upper bound: whole adapters at the maximum rank on every module)")
    return VllmLora(total, host, n, r, notes)
