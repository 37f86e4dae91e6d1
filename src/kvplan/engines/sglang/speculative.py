"""SGLang speculative decoding (EAGLE / EAGLE3 / NEXTN / STANDALONE): what the draft worker adds on each rank.

Read from the 0.5.9 wheel (https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/...):

- ``server_args.py::ServerArgs._handle_speculative_decoding``: NEXTN is EAGLE; ``--max-running-requests``
  defaults to 48; a DeepSeek-V3-class target drafts with its own NextN/MTP layers (draft path = model path);
  ``auto_choose_speculative_params``: (steps, topk, draft tokens) = (5, 4, 8) for LlamaForCausalLM and Grok,
  (3, 1, 4) otherwise; topk 1 forces draft tokens = steps + 1. ``_handle_gpu_memory_settings`` adds 2 GiB (EAGLE)
  or 6 GiB (STANDALONE) to the reserve before mem_fraction_static (``defaults.py``).
- ``speculative/eagle_worker.py::EAGLEWorker.__init__``: the draft ModelRunner is built after the target one
  (whose ``init_memory_pool`` already sized the KV pool from the memory then free) and shares its req_to_token
  pool and allocator; it owns a token_to_kv_pool of ``draft_runner_cache_size`` = the target's token count
  (``model_runner_kv_cache_mixin.py::init_memory_pool``) with the draft's layers (``num_nextn_predict_layers``
  for an MTP draft, ``model_runner.py::ModelRunner.initialize``). Draft weights and draft KV therefore come out of
  the memory outside the static fraction, not out of the target's KV pool.
- req_to_token columns: context_len + 4 + num_draft_tokens (``init_memory_pool``).

0.5.14+ fold the draft's layers into the target's cell before the tokens are sized
(https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/model_executor/pool_configurator.py, "EAGLE/
STANDALONE: assumes the draft shares the target's per-layer KV size"): cell × (1 + d / n) (0.5.14-0.5.17,
``int(cell * (1 + d / n))``; 0.5.18+ ``cell + int(cell * d / n)``), d = the draft's layers
(``eagle_draft_num_layers``: ``num_nextn_predict_layers`` or the draft's ``num_hidden_layers``), n = the target's:
the draft KV then lives inside the static pool. 0.5.7-0.5.13 (read: 0.5.7, 0.5.8, 0.5.9, 0.5.10, 0.5.11, 0.5.12,
0.5.13) keep it outside. 0.5.3-0.5.6 grow the shared pool by max_num_reqs × (steps × topk + draft tokens) + 100
tokens instead: those releases keep the ``unmodeled-memory`` warning (``MODELLED``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.engines.sglang.args import SGLangArgs
from kvplan.engines.versions import Version
from kvplan.errors import KvplanError
from kvplan.models.spec import ModelSpec

# the releases modelled (module docstring): 0.5.7 dropped 0.5.3-0.5.6's extra draft/verify tokens; read through
# 0.5.23 at 0.5.7-0.5.14, 0.5.18, 0.5.22, 0.5.23 (the wheels between are taken to follow their neighbours)
MODELLED = ("0.5.7", "0.5.23")
IN_STATIC = "0.5.14"  # the draft's layers join the target's cell (pool_configurator.py)
EAGLE_LIKE = ("EAGLE", "EAGLE3", "STANDALONE")
# server_args.py::ServerArgs._handle_speculative_decoding: the architectures whose draft is their own MTP layer
MTP_ARCHS = ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM",
             "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM")
_LLAMA_DEFAULTS = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")  # auto_choose_speculative_params


@dataclass(frozen=True)
class SpecPlan:
    """What the draft worker of one rank holds, and the defaults speculation changes."""

    algorithm: str
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    draft: str  # what the draft is, in words
    weights_bytes: int  # draft weights on this rank (beyond what it shares with the target)
    kv_bytes_per_token: int  # the draft's own token_to_kv_pool, per token on this rank
    max_running_requests: int | None  # the default speculation sets (None: the flag's)
    notes: tuple[str, ...]
    draft_layers: int = 1  # eagle_draft_num_layers
    in_static: bool = False  # 0.5.14+: the draft KV is budgeted inside the static pool (the target's cell grows)

    def sizing_cell(self, cell: int, target_layers: int, version: str) -> int:
        """The per-token cost the target's pool is sized with (module docstring; ``cell`` when outside)."""
        if not self.in_static or target_layers <= 0:
            return cell
        d, n = self.draft_layers, target_layers
        return cell + int(cell * d / n) if Version(version) >= Version("0.5.18") else int(cell * (1 + d / n))

    def kv_pool_bytes(self, tokens: int, page: int) -> int:
        """The draft's KV buffers: draft_runner_cache_size (= the target's tokens) + one padding page."""
        return (tokens + page) * self.kv_bytes_per_token if tokens else 0


def modelled(version: str, algorithm: str | None) -> bool:
    return bool(algorithm) and str(algorithm).upper() in EAGLE_LIKE + ("NEXTN",) and \
        Version(MODELLED[0]) <= Version(version) <= Version(MODELLED[1])


def _params(model: ModelSpec, args: SGLangArgs, algo: str) -> tuple[int, int, int]:
    if args.speculative_num_steps is None:
        if algo == "STANDALONE":
            steps, topk, tokens = 3, 1, 4
        elif model.architecture in _LLAMA_DEFAULTS:
            steps, topk, tokens = 5, 4, 8
        else:
            steps, topk, tokens = 3, 1, 4
    else:
        steps = args.speculative_num_steps
        topk = args.speculative_eagle_topk or 1
        tokens = args.speculative_num_draft_tokens or steps + 1
    if topk == 1:
        tokens = steps + 1
    return steps, topk, tokens


def plan_speculative(model: ModelSpec, args: SGLangArgs, version: str, gpu_name: str | None,
                     kv_dtype_bytes: int) -> SpecPlan | None:
    """The draft of this launch, or None without speculation (or an algorithm not modelled: the caller keeps the
    ``unmodeled-memory`` warning)."""
    if not modelled(version, args.speculative_algorithm):
        return None
    algo = str(args.speculative_algorithm).upper()
    algo = "EAGLE" if algo == "NEXTN" else algo
    steps, topk, tokens = _params(model, args, algo)
    notes = [f"speculative {algo}: steps {steps}, topk {topk}, draft tokens {tokens} "
             f"({'flags' if args.speculative_num_steps else 'server_args.py::auto_choose_speculative_params'})"]
    attn_tp = args.attn_tp_size
    if algo == "EAGLE" and model.architecture in MTP_ARCHS and model.num_nextn_predict_layers:  # EAGLE3: the head
        from kvplan.engines.sglang.weights import nextn_layer_bytes
        from kvplan.models.weights import checkpoint_dir_of

        w, parts = nextn_layer_bytes(model, args, gpu_name or "", version, checkpoint_dir_of(model, args.model_path))
        if not parts.get("attention"):  # the checkpoint (or its synthesis) has no NextN layer: not sized
            return None
        k = layers = model.num_nextn_predict_layers
        if model.is_mla:  # MLATokenToKVPool: one latent row per layer, not split over TP
            cell = model.mla_kv_dim * k * kv_dtype_bytes
        else:
            cell = max(1, model.num_kv_heads // attn_tp) * (model.head_dim + model.v_head_dim) * k * kv_dtype_bytes
        draft = f"the target's own {k} NextN/MTP layer(s) (models/deepseek_nextn.py; embed and head shared)"
        notes.append(f"draft: {draft}: " + ", ".join(f"{p} {b / 2**30:.2f}" for p, b in parts.items()) + " GiB")
    elif algo == "EAGLE3" or algo == "EAGLE":
        from kvplan.models.drafts import draft_config, eagle3_head

        if algo == "EAGLE":  # an EAGLE-1/2 head (LlamaForCausalLMEagle) is not sized: the warning stays
            try:
                d = draft_config(args.speculative_draft_model_path, "--speculative-draft-model-path")
            except KvplanError:
                return None
            if "Eagle3" not in str((d.config.get("architectures") or [""])[0]):
                return None
        else:
            d = draft_config(args.speculative_draft_model_path, "--speculative-draft-model-path")
        head = eagle3_head(d, args.tp_size if not args.enable_dp_attention else attn_tp, model.hidden_size)
        w, cell, layers = head.weights_bytes, head.kv_bytes_per_token(kv_dtype_bytes), head.layers
        draft = f"EAGLE-3 head {d.name} ({head.layers} layer)"
        notes.append(f"draft: {draft}, config from {d.source}: "
                     + ", ".join(f"{p} {b / 2**20:.0f}" for p, b in head.parts.items())
                     + " MiB per rank (its embed_tokens is replaced by the target's: not counted)")
    else:  # STANDALONE: a whole second model (standalone_worker.py), sharded like the target
        from kvplan.engines.sglang.cell import compute_cell
        from kvplan.engines.sglang.weights import plan_weights
        from kvplan.models.catalog import resolve_model

        if not args.speculative_draft_model_path:
            raise KvplanError("--speculative-algorithm STANDALONE without --speculative-draft-model-path: the draft "
                              "model is the missing figure", "add --speculative-draft-model-path")
        try:
            dm = resolve_model(args.speculative_draft_model_path)
        except KvplanError as e:
            raise KvplanError(f"STANDALONE draft: {e.args[0]}", "pass --speculative-draft-model-path as a local "
                              "directory holding the draft's config.json") from None
        w = plan_weights(dm, replace(args, model_path=args.speculative_draft_model_path), gpu_name, version).bytes
        cell, layers = compute_cell(dm, args).bytes_per_token, dm.num_layers
        draft = f"standalone draft model {dm.name} ({dm.num_layers} layers, sharded like the target)"
        notes.append(f"draft: {draft}: weights {w / 2**30:.2f} GiB per rank (standalone_worker.py)")
    in_static = Version(version) >= Version(IN_STATIC)
    notes.append(f"draft KV: {cell:,} B per token per rank, as many tokens as the target's pool; " + (
        f"budgeted inside mem_fraction_static: the target's cell grows by {layers} draft layer(s) over its own "
        "(model_executor/pool_configurator.py)" if in_static else
        "draft weights and KV live outside mem_fraction_static (draft_runner_cache_size)"))
    notes.append(f"CUDA graphs: the target's verify graphs are captured up to the request pool's size, "
                 f"{tokens} tokens per request (cuda_graph_runner.py::get_batch_sizes_to_capture); the draft's "
                 "decode and extend graphs are not estimated apart (the engine's extra reserve is meant for them)")
    mrr = None if args.max_running_requests else 48
    if mrr:
        notes.append("--max-running-requests defaults to 48 with speculative decoding "
                     "(server_args.py::_handle_speculative_decoding)")
    return SpecPlan(algo, steps, topk, tokens, draft, int(w), int(cell), mrr, tuple(notes), layers, in_static)
