"""SGLang LoRA buffers: the LoRAMemoryPool one rank allocates before its KV pool is sized.

Read from the 0.5.9 wheel (https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/...; 0.5.3 and
0.5.23 build the same buffers for dense layers, 0.5.23 through ``get_default_hidden_dim`` and
``_column_parallel_lora_b_per_rank_dim``; the releases between are taken to follow them):

- ``model_executor/model_runner.py::ModelRunner.initialize``: ``init_lora_manager`` runs after ``load_model`` and
  before ``init_memory_pool``, so the buffers come out of the memory the KV pool is profiled from.
- ``lora/mem_pool.py::LoRAMemoryPool.init_buffers``: for each target module (normalized: q/k/v → qkv_proj,
  gate/up → gate_up_proj) and each of ``num_hidden_layers`` layers, in the base model's dtype:
  A ``(max_loras_per_batch, stacked × max_lora_rank, input_dim)`` and B ``(max_loras_per_batch, output_dim,
  max_lora_rank)``; stacked = 3 for qkv_proj, 2 for gate_up_proj; under TP, o_proj / down_proj split A's input,
  the others split B's output. embed_tokens / lm_head get one A and one B over the whole vocabulary (not split).
- ``lora/utils.py::get_hidden_dim`` (the default, used by Llama, Qwen, Mistral, ...): qkv_proj H → head_dim ×
  (heads + 2 kv heads); o_proj heads × head_dim → H; gate_up_proj H → 2I; down_proj I → H.
- ``server_args.py``: target modules from ``--lora-target-modules`` (``all``: every supported module, less
  embed_tokens and lm_head under the default ``csgmv`` backend) or the union of the adapters' PEFT
  ``target_modules``; ``--max-lora-rank`` or the adapters' largest ``r``; ``--max-loras-per-batch`` default 8.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kvplan.engines.sglang.args import SGLangArgs
from kvplan.engines.versions import Version
from kvplan.errors import KvplanError
from kvplan.models.spec import ModelSpec

SRC = "https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/lora/mem_pool.py::LoRAMemoryPool"
LINEAR = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
_NORMALIZE = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj",
              "up_proj": "gate_up_proj", "vocab_emb": "embed_tokens", "embeddings": "embed_tokens",
              "word_embeddings": "embed_tokens", "output": "lm_head", "unembed_tokens": "lm_head"}
_STACKED = {"qkv_proj": 3, "gate_up_proj": 2}
_ROW = ("o_proj", "down_proj")
_TRITON_DEFAULT = ("0.5.3", "0.5.3.post1", "0.5.3.post2", "0.5.4", "0.5.4.post1")


@dataclass(frozen=True)
class LoraPlan:
    bytes: int  # per rank
    max_loras_per_batch: int
    max_lora_rank: int
    target_modules: tuple[str, ...]
    notes: tuple[str, ...]
    host_bytes: int = 0  # per rank: the adapters' weights on the CPU (LoRAManager.load_lora_weights)


def _adapter_dir(spec: str) -> Path:
    path = spec
    if spec.startswith("{"):
        try:
            path = str(json.loads(spec).get("lora_path") or "")
        except (ValueError, AttributeError):
            path = ""
    elif "=" in spec:
        path = spec.split("=", 1)[1]
    return Path(os.path.expanduser(path))


def _adapter_file_bytes(spec: str) -> int | None:
    """Bytes of a local adapter's weight files (what ``LoRAAdapter.initialize_weights`` loads to the CPU)."""
    try:
        files = [f for f in _adapter_dir(spec).iterdir() if f.name.startswith("adapter_model.")]
        return sum(f.stat().st_size for f in files) if files else None
    except OSError:
        return None


def _adapter_config(spec: str) -> dict | None:
    """The PEFT adapter_config.json of one ``--lora-paths`` entry (``name=path``, ``path``, or a JSON object), when
    the path is a local directory; None otherwise (kvplan never downloads)."""
    try:
        d = json.loads((_adapter_dir(spec) / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _normalize(names) -> set[str]:
    return {_NORMALIZE.get(n.split(".")[-1], n.split(".")[-1]) for n in names}


def _dims(model: ModelSpec, module: str) -> tuple[int, int]:
    h, hd = model.hidden_size, model.head_dim
    inter = model.intermediate_size
    return {"qkv_proj": (h, hd * (model.num_attention_heads + 2 * model.num_kv_heads)),
            "o_proj": (hd * model.num_attention_heads, h), "gate_up_proj": (h, 2 * inter),
            "down_proj": (inter, h), "embed_tokens": (model.vocab_size, h),
            "lm_head": (h, model.vocab_size)}[module]


def plan_lora(model: ModelSpec, args: SGLangArgs, version: str) -> LoraPlan | None:
    """The LoRA buffers of one rank, or None (the ``unmodeled-memory`` warning stays) without ``--enable-lora`` /
    ``--lora-paths``, outside the releases read (0.5.3, 0.5.9 and 0.5.23: the same pool and order for dense layers;
    0.5.23 shards attention buffers over the attention-TP group and widens ``all``: DP attention and ``all`` after
    0.5.9 are not sized), or for layers not sized here."""
    v = Version(version)
    if not (args.enable_lora or args.lora_paths) or not Version("0.5.3") <= v <= Version("0.5.23") \
            or args.enable_dp_attention or (v > Version("0.5.9") and "all" in args.lora_target_modules):
        return None
    if model.is_mla or model.is_multimodal or model.n_linear_layers or model.moe is not None:
        return None  # their own get_hidden_dim / MoE LoRA: not sized here, the warning stays
    notes: list[str] = []
    configs = [c for c in map(_adapter_config, args.lora_paths) if c is not None]
    unread = len(args.lora_paths) - len(configs)
    rank = args.max_lora_rank or max((int(c.get("r") or 0) for c in configs), default=0)
    if not rank:
        raise KvplanError("SGLang LoRA: the maximum LoRA rank is the missing figure (no --max-lora-rank, and no "
                          "adapter in --lora-paths is a local directory with adapter_config.json)",
                          "add --max-lora-rank to the launch command")
    # --lora-backend default (flags.json): triton in 0.5.3-0.5.3.post2 and 0.5.4-0.5.4.post1, csgmv otherwise
    csgmv = (args.lora_backend or ("triton" if version in _TRITON_DEFAULT else "csgmv")) == "csgmv"
    if args.lora_target_modules:
        if "all" in args.lora_target_modules:
            mods = set(LINEAR) if csgmv else set(LINEAR) | {"embed_tokens", "lm_head"}
        else:
            mods = _normalize(args.lora_target_modules)
        src = "--lora-target-modules"
    elif configs and not unread and all(isinstance(c.get("target_modules"), list) for c in configs):
        mods = set().union(*(_normalize(c["target_modules"]) for c in configs))
        src = "the adapters' adapter_config.json"
    else:
        mods = set(LINEAR)
        src = ("assumed: every linear module (q/k/v/o/gate/up/down), the usual all-linear PEFT set, since "
               f"{unread or len(args.lora_paths)} adapter(s) are not local directories; --lora-target-modules "
               "states them")
    if mods - set(LINEAR) - {"embed_tokens", "lm_head"}:
        return None  # a module kvplan does not size: the warning stays
    n, tp, elem = args.max_loras_per_batch, args.tp_size, model.dtype_bytes
    total = _buffers(model, mods, n, rank, tp, elem)
    # every rank loads every adapter whole on the CPU (lora_manager.py::load_lora_weights): the files when local,
    # else one slot's unsharded share of the buffers (rank max_lora_rank on every target module), an upper bound
    one = _buffers(model, mods, 1, rank, 1, elem)
    host = sum(_adapter_file_bytes(p) or one for p in args.lora_paths)
    notes.append(f"LoRA adapters on the host: {len(args.lora_paths)} × up to {one / 2**30:.2f} GiB per rank "
                 "(loaded whole to the CPU on every rank; local adapter files counted as they are)")
    notes.insert(0, f"LoRA buffers {total / 2**30:.2f} GiB per rank: {n} adapters per batch × rank {rank} × "
                    f"{', '.join(sorted(mods))} × {model.num_layers} layers in {model.dtype} ({SRC}); target "
                    f"modules from {src}; allocated before the KV pool is sized")
    return LoraPlan(total, n, rank, tuple(sorted(mods)), tuple(notes), host)


def _buffers(model: ModelSpec, mods: set[str], n: int, rank: int, tp: int, elem: int) -> int:
    total = 0
    for m in sorted(mods):
        din, dout = _dims(model, m)
        if m in ("embed_tokens", "lm_head"):  # one A and one B, whole vocabulary, not split over TP
            total += n * rank * din * elem + n * dout * rank * elem
            continue
        a_in = din // tp if (tp > 1 and m in _ROW) else din
        b_out = dout if m in _ROW or tp == 1 else dout // tp
        total += model.num_layers * (n * _STACKED.get(m, 1) * rank * a_in + n * b_out * rank) * elem
    return total
