"""Weights one SGLang rank holds after ``ModelRunner.load_model`` ("Load weight end ... mem usage=X GB").

Read from the 0.4.6, 0.4.8.post1 and 0.5.9 wheels (https://github.com/sgl-project/sglang/blob/v0.5.9/python/
sglang/srt/...; between two wheels read, the older behaviour applies):

- Sharding: the layer classes of ``layers/linear.py`` and ``layers/vocab_parallel_embedding.py`` (vocab padded to
  64, ``DEFAULT_VOCAB_PADDING_SIZE``), see ``models.placement``. Attention is split over the attention-TP group
  (``get_attention_tp_size()``: tp/dp under ``--enable-dp-attention``). Embeddings under DP attention:
  replicated (``enable_tp=not enable_dp_attention``, ≤0.4.8) or over the attention-TP group
  (``use_attn_tp_group=is_dp_attention_enabled()``, 0.5.9); LM head over attention TP only with
  ``--enable-dp-lm-head``. Dense MLP whole with ``--moe-dense-tp-size 1`` (``enable_moe_dense_fully_dp``).
  Experts: ``--ep-size`` (``--enable-ep-moe``/DeepEP: ep = tp) splits experts, ``moe_tp = tp // ep`` splits each.
- ``models/deepseek_v2.py``: ``fused_qkv_a_proj_with_mqa`` / ``kv_a_proj_with_mqa`` are ``ReplicatedLinear``;
  ``MoEGate`` is a replicated parameter; shared experts are fused into the MoE as extra experts when
  ``determine_n_share_experts_fusion`` (0.4.6: tp_size replicas on ``torch.cuda.get_device_capability() >= (9, 0)``,
  256 experts) / ``determine_num_fused_shared_experts`` (0.4.8+: one, CUDA ≥ sm80; 0.5.9 also ROCm gfx942+ (device
  capability ≥ (9, 4)), no EP but on ROCm gfx942+); the capability is the GPU catalog's (``GPU.device_capability``);
  ``post_load_weights`` keeps ``w_kc``/``w_vc`` copies of kv_b_proj (bf16 when kv_b is bf16 or, on CUDA ≥ 0.4.8,
  fp8 128×128 blocks dequantized by ``block_quant_dequant``; fp8 on ROCm / 0.4.6).
- ``layers/rotary_embedding.py``: ``cos_sin_cache`` in fp32 on CUDA (``if not _is_cuda: cache.to(dtype)``,
  0.4.3+), model dtype before and on ROCm; ``DeepseekScalingRotaryEmbedding`` also keeps ``cos_cached_total`` and
  ``sin_cached_total`` [rows, rotary_dim] fp32 (0.5.9).
- ``compressed_tensors_wNa16_moe.py``: INT4 MoE on CUDA is repacked for Marlin and the ``g_idx`` /
  ``g_idx_sort_indices`` int32 [E, H] and [E, I] tensors from ``create_weights`` are replaced by empty ones; on
  ROCm ``CompressedTensorsWNA16TritonMoE`` keeps them.
- ``--quantization fp8`` on a bf16/fp16 checkpoint (``layers/quantization/fp8.py``): every ``LinearBase`` and
  ``FusedMoE`` weight is loaded in the model dtype and quantized to fp8 in ``process_weights_after_loading``
  after the whole model is loaded (per-channel fp32 scales on CUDA, one per tensor on ROCm; per-expert scales);
  embeddings, LM head, routers and norms stay.

"mem usage" is the drop of ``torch.cuda.mem_get_info`` across the load (``get_available_gpu_memory`` with
``empty_cache``), so it also holds the caching allocator's segment tails (``models.torch_allocator`` over the
fused parameters) and what the process gains while loading (``load_calibration.load_context_growth``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.engines.sglang.capability import device_capability, quant_refusal
from kvplan.engines.sglang.eplb import expert_layout
from kvplan.engines.sglang.online_fp8 import checkpoint_quantized, experts_kept_eagerly, online_fp8
from kvplan.engines.spreads import observed_weights_fraction
from kvplan.engines.versions import Version
from kvplan.models.memo import Memo
from kvplan.models.placement import Layout, placer, role_of
from kvplan.models.postload import platform_of, wna16_g_idx_bytes
from kvplan.models.roles import Role
from kvplan.models.rope import rope_caches
from kvplan.models.sharding import Placement, WeightsEstimate, cdiv, describe_parts, gib_str, per_rank_sum
from kvplan.models.spec import ModelSpec
from kvplan.models.tensors import TensorGroup
from kvplan.models.weights import hold_in_dtype, load_tensors
from kvplan.models.weights_band import WeightsPlan

MiB = 1 << 20


@dataclass(frozen=True)
class WeightArgs:
    """The launch flags the weights of a rank depend on (everything ``_estimate_stage`` reads of the launch): with
    the model's identity, the platform, the version and the stage, the key of the memoized estimate."""

    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    enable_dp_attention: bool = False
    moe_a2a_backend: str | None = None
    ep_size: int = 1
    enable_ep_moe: bool = False
    enable_deepep_moe: bool = False
    moe_dense_tp_size: int | None = None
    enable_dp_lm_head: bool = False
    disable_shared_experts_fusion: bool = False
    dtype: str = "auto"
    quantization: str | None = None
    ep_num_redundant_experts: int = 0  # EPLB: physical experts beyond the routed ones (eplb.py)

    @classmethod
    def of(cls, args) -> WeightArgs:
        return cls(args.tp_size, args.pp_size, args.dp_size, bool(args.enable_dp_attention),
                   getattr(args, "moe_a2a_backend", None), int(getattr(args, "ep_size", 1) or 1),
                   bool(getattr(args, "enable_ep_moe", False)), bool(getattr(args, "enable_deepep_moe", False)),
                   getattr(args, "moe_dense_tp_size", None), bool(getattr(args, "enable_dp_lm_head", False)),
                   bool(getattr(args, "disable_shared_experts_fusion", False)), getattr(args, "dtype", "auto"),
                   getattr(args, "quantization", None), int(getattr(args, "ep_num_redundant_experts", 0) or 0))


def pp_ranges(n_layers: int, pp: int, version: Version) -> list[range]:
    """``distributed/utils.py::get_pp_indices``: ≤0.4.8 the last stage takes the remainder; 0.5.9 the last
    ``remainder`` stages take one extra layer each."""
    base, rem = divmod(n_layers, pp)
    if version < Version("0.5.9"):
        sizes = [base] * (pp - 1) + [base + rem]
    else:
        sizes = [base] * (pp - rem) + [base + 1] * rem
    out, start = [], 0
    for s in sizes:
        out.append(range(start, start + s))
        start += s
    return out


def runtime_dtype(model: ModelSpec, args) -> str:
    """``configs/model_config.py::_get_and_verify_dtype``: --dtype as given; "auto" keeps the config dtype except
    float32, which becomes float16 (bfloat16 for Gemma)."""
    st = {"half": "F16", "float16": "F16", "bfloat16": "BF16", "float": "F32", "float32": "F32"}
    explicit = str(getattr(args, "dtype", "auto") or "auto").lower()
    if explicit in st:
        return st[explicit]
    cfg = st.get(str(model.dtype).replace("torch.", ""), "BF16")
    if cfg == "F32":
        return "BF16" if model.model_type.startswith("gemma") else "F16"
    return cfg


def _layout(model: ModelSpec, args, v: Version) -> tuple[Layout, int]:
    tp, pp = args.tp_size, args.pp_size
    dp_attn = bool(args.enable_dp_attention)
    attn_tp = tp // args.dp_size if dp_attn else tp
    a2a = str(getattr(args, "moe_a2a_backend", None) or "")
    ep = int(getattr(args, "ep_size", 1) or 1)
    if getattr(args, "enable_ep_moe", False) or getattr(args, "enable_deepep_moe", False) or a2a not in ("", "none"):
        ep = tp
    dense_dp = dp_attn and getattr(args, "moe_dense_tp_size", None) == 1
    embed_tp = (attn_tp if v >= Version("0.5.9") else 1) if dp_attn else tp
    head_tp = attn_tp if getattr(args, "enable_dp_lm_head", False) else tp
    shared_tp = 1 if a2a not in ("", "none") or getattr(args, "enable_deepep_moe", False) else tp
    return Layout(tp=tp, attn_tp=attn_tp, mlp_tp=1 if dense_dp else tp, shared_tp=shared_tp, moe_tp=max(1, tp // ep),
                  ep=ep, embed_tp=embed_tp, head_tp=head_tp, vision_tp=tp, vocab_pad=64,
                  num_heads=model.num_attention_heads, num_kv_heads=model.num_kv_heads,
                  n_layers=model.num_layers), pp


def _fused_shared(model: ModelSpec, args, lay: Layout, v: Version, platform: str,
                  cap: tuple[int, int] | None = None) -> int:
    """Shared-expert replicas fused into the routed MoE (0 = kept as a separate TP-split MLP); ``cap``: the device
    capability (None: not catalogued, taken as supported)
    (https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/models/deepseek_v2.py
    ``determine_num_fused_shared_experts``; v0.4.6 ``determine_n_share_experts_fusion``)."""
    cfg = (model.config or {}).get("text_config") or model.config or {}
    if not model.is_mla or model.moe is None or model.moe.num_experts != 256 or getattr(
            args, "disable_shared_experts_fusion", False) or "DeepseekV3" not in str(
            (cfg.get("architectures") or [model.architecture])[0]):
        return 0
    if v < Version("0.4.6"):
        return 0
    if v < Version("0.4.8"):  # n_share_experts_fusion = tp_size when capability >= (9, 0) (H100, MI300)
        return lay.tp if lay.ep == 1 and (cap is None or cap >= (9, 0)) else 0
    if cap is not None and cap < ((9, 4) if platform == "rocm" else (8, 0)):  # CUDA sm80+, ROCm gfx942+
        return 0
    if lay.ep > 1 and not (platform == "rocm" and v >= Version("0.5.9")):
        return 0
    if platform == "rocm" and v < Version("0.5.9"):
        return 0
    return int(cfg.get("n_shared_experts") or 1)


def estimate_weights(model: ModelSpec, args, cluster_platform: str, version: str,
                     checkpoint_dir: str | None, gpu_name: str | None = None) -> WeightsEstimate:
    """Per-rank weight bytes of an SGLang launch (the heaviest pipeline stage)."""
    return estimate_stage(model, args, cluster_platform, version, checkpoint_dir, None, gpu_name)


def estimate_stage(model: ModelSpec, args, cluster_platform: str, version: str, checkpoint_dir: str | None,
                   stage: int | None, gpu_name: str | None = None) -> WeightsEstimate:
    """Per-rank weight bytes on pipeline stage ``stage`` (None: the heaviest), once per model, layout flags
    (``WeightArgs``), platform, version and stage (``models.memo``); a checkpoint directory's by its files too."""
    from kvplan.models.weights import checkpoint_key

    wa = WeightArgs.of(args)
    cap = device_capability(gpu_name)
    key = (model.identity, wa, cluster_platform, version, stage, cap, checkpoint_key(checkpoint_dir))
    return _ESTIMATES.get(key, lambda: _estimate_stage(model, wa, cluster_platform, version, checkpoint_dir, stage,
                                                       cap))


_ESTIMATES: Memo[WeightsEstimate] = Memo("SGLang weights per rank", 256)


def _estimate_stage(model: ModelSpec, args: WeightArgs, cluster_platform: str, version: str,
                    checkpoint_dir: str | None, stage: int | None,
                    cap: tuple[int, int] | None = None) -> WeightsEstimate:
    """Per-rank weight bytes on pipeline stage ``stage`` (None: the heaviest)."""
    from kvplan.engines.sglang.load_calibration import load_context_growth

    v = Version(version)
    platform = cluster_platform if cluster_platform in ("cuda", "rocm", "cpu") else platform_of(cluster_platform)
    t = load_tensors(model, checkpoint_dir)
    groups, notes = hold_in_dtype(t.groups, runtime_dtype(model, args)), list(t.notes)
    lay, pp = _layout(model, args, v)
    online = str(getattr(args, "quantization", None) or "").lower() == "fp8" and not checkpoint_quantized(groups)
    bf16_bytes = 0
    if online:
        bf16_groups = groups
        groups, _ = online_fp8(groups)
    fused = _fused_shared(model, args, lay, v, platform, cap)
    top_type = str((model.config or {}).get("model_type") or model.model_type)

    def rule(g: TensorGroup, r: Role) -> tuple[str | None, str | None]:
        if fused and r.group == "shared_experts":
            return ("expert_row" if r.kind == "row" else "expert_col"), "experts"
        if top_type in ("kimi_k25", "kimi_vl") and r.group == "vision" and ".mlp." in g.template:
            return "replicated", None  # MoonViT MLP2 is nn.Linear (models/kimi_vl_moonvit.py::MLP2)
        return None, None

    place = placer(lay, rule)

    def fplace(g: TensorGroup) -> Placement | None:
        """Each rank holds ``fused`` replicas of the shared expert inside the MoE, split like an expert."""
        p = place(g)
        if fused and p is not None and role_of(g).group == "shared_experts":
            p = replace(p, per_rank_count=cdiv(fused, lay.ep))
        return p
    ranges = pp_ranges(model.num_layers, pp, v)
    sums = per_rank_sum(groups, fplace, ranges)
    experts = expert_layout(model, args.ep_num_redundant_experts, lay.ep) if args.ep_num_redundant_experts else None
    if experts and experts.note:
        notes.append(experts.note)
    redundant = experts.redundant if experts else 0

    def rplace(g: TensorGroup) -> Placement | None:
        """EPLB: each EP rank holds (E + R) // EP routed experts (eplb.py: FusedMoE.num_local_experts)."""
        p = fplace(g)
        if p is not None and p.per_rank_count is not None and role_of(g).group == "experts":
            p = replace(p, per_rank_count=(g.count + redundant) // lay.ep)
        return p
    if stage is None:
        stage, parts = sums.heaviest()
    else:
        parts = sums.stages[stage]
    parts = dict(parts)
    if redundant:  # the same stage with the redundant copies; the difference is its own part
        with_r = per_rank_sum(groups, rplace, ranges).stages[stage].get("experts", 0)
        parts["eplb_redundant_experts"] = with_r - parts.get("experts", 0)
    if online:
        before = per_rank_sum(bf16_groups, fplace, ranges).stages[stage]
        bf16_bytes = sum(before.values())
        if experts_kept_eagerly(model, v):
            parts["experts_kept_unquantized"] = before.get("experts", 0)
    # ---- what the engine adds after loading ---------------------------------------------------------------
    rope_fp32 = platform == "cuda" and v >= Version("0.4.3")
    rope = 0
    for rc in rope_caches(model):
        rope += rc.rows * rc.rotary_dim * (4 if rope_fp32 else model.dtype_bytes)
        if rc.kind == "deepseek_yarn" and v >= Version("0.5.9"):
            rope += 2 * rc.rows * rc.rotary_dim * 4  # cos_cached_total, sin_cached_total
    parts["rope_cache"] = rope
    if model.is_mla:
        layers_here = len(ranges[stage])
        local_heads = model.num_attention_heads // lay.attn_tp
        kvb_fp8 = any("kv_b_proj.weight" in g.template and g.dtype.startswith("F8") for g in groups)
        elem = 1 if kvb_fp8 and (platform == "rocm" or v < Version("0.4.8")) else 2
        parts["mla_w_kc_w_vc"] = layers_here * local_heads * (model.qk_nope_head_dim + model.v_head_dim) \
            * model.kv_lora_rank * elem
    if platform == "rocm":
        parts["moe_g_idx"] = wna16_g_idx_bytes(groups, lay, ranges[stage], fused)
    if pp > 1 and _tied(groups) and stage == len(ranges) - 1:  # a separate ParallelLMHead on the last stage
        emb = next(g for g in groups if role_of(g).kind == "embed")
        parts["lm_head"] = parts.get("lm_head", 0) + cdiv(cdiv(emb.shape[0], 64) * 64, lay.head_tp) * \
            emb.nbytes // emb.shape[0]
    tensors = sum(parts.values())
    parts["allocator_segments"] = _segment_rounding(groups, rplace if redundant else fplace, ranges[stage]) \
        if platform != "cpu" else 0
    growth = load_context_growth(platform, lay.tp, version, moe=model.moe is not None)
    parts["load_context"] = int(growth.value_gib * 2**30)
    total = sum(parts.values())
    src = f"{t.source}; SGLang {version} {platform} sharding"
    notes.insert(0, f"weights {gib_str(total)} GiB per rank: {'read from ' if t.exact else ''}{t.source}: "
                    f"{describe_parts(parts)}")
    if model.is_mla:
        notes.append("MLA: fused_qkv_a_proj_with_mqa / kv_a_proj replicated on every rank; w_kc/w_vc copies "
                     f"{gib_str(parts['mla_w_kc_w_vc'])} GiB")
    if redundant and experts:
        notes.append(f"EPLB: {experts.logical} routed + {redundant} redundant experts over EP {lay.ep}: "
                     f"{experts.local} per rank per MoE layer, {gib_str(parts['eplb_redundant_experts'])} GiB of "
                     "redundant experts")
    if fused:
        notes.append(f"shared expert fused into the MoE ({fused} replica(s) per layer)")
    if pp > 1:
        notes.append(f"pipeline stage {stage} of {pp} holds the most ({len(ranges[stage])} layers)")
    notes.append(f"{gib_str(parts['allocator_segments'] + parts['load_context'])} GiB of allocator segments and "
                 f"CUDA context growth during loading (calibrated: {growth.what})")
    if parts.get("experts_kept_unquantized"):
        notes.append(f"SGLang {version} {model.architecture} keeps the {model.dtype} expert weights referenced "
                     "(routed_experts_weights_of_layer) next to the fp8 ones")
    if online:
        notes.append(f"--quantization fp8 on a {model.dtype} checkpoint: linear and expert weights held in fp8 "
                     f"after loading; the whole model is first loaded in {model.dtype}, peak "
                     f"{gib_str(bf16_bytes)} GiB per rank")
    del tensors
    return WeightsEstimate(total, parts, src, t.exact, tuple(notes), load_peak_bytes=bf16_bytes if online else 0)


def _tied(groups) -> bool:
    return not any(role_of(g).kind == "lm_head" and g.layer is None for g in groups)


def _segment_rounding(groups, place, layers: range) -> int:
    """Caching-allocator segment tails over SGLang's parameters as the model builds them (``models.torch_allocator``):
    one parameter per fused module and layer (q/k/v -> ``qkv_proj``, gate/up -> ``gate_up_proj``, experts stacked
    as w13 / w2 per layer), created embedding first, then layer by layer (each layer's in the order its groups come),
    then the rest. Groups alike but for their layer are placed once (``tensors.fold_rows``)."""
    from kvplan.models.sharding import shard_bytes
    from kvplan.models.tensors import fold_rows
    from kvplan.models.torch_allocator import reserved_overhead_bytes

    sizes: dict[tuple, int] = {}
    first: dict[tuple, int] = {}  # the position of the first group of each parameter
    for row in fold_rows(groups):
        g = row.group
        members = [(None, row.positions[0])] if g.layer is None else \
            [(layer, pos) for layer, pos in zip(row.layers, row.positions, strict=True) if layer in layers]
        if not members:
            continue
        p = place(g)
        if p is None:
            continue
        parts = g.template.rsplit(".", 2)
        leaf = parts[-1]
        mod = parts[-2] if len(parts) >= 2 else g.template
        prefix = parts[0] if len(parts) == 3 else ""
        merged = {"gate_proj": "w13", "up_proj": "w13", "w1": "w13", "w3": "w13", "q_proj": "qkv", "k_proj": "qkv",
                  "v_proj": "qkv", "q_a_proj": "qkv_a", "kv_a_proj_with_mqa": "qkv_a"}.get(mod, mod)
        expert = role_of(g).group == "experts"
        if expert:  # experts.{e}.w1 ... -> one stacked parameter per layer
            prefix = prefix.split("experts")[0]
        n = shard_bytes(g, p)
        for layer, pos in members:
            key = (layer, expert, prefix, merged, leaf)
            sizes[key] = sizes.get(key, 0) + n
            if pos < first.get(key, pos + 1):
                first[key] = pos

    def order(k: tuple) -> tuple[int, int, int]:
        if k[0] is None:
            return (0 if "embed" in (k[2] + k[3]) else 2, 0, first[k])
        return (1, k[0], first[k])

    return reserved_overhead_bytes(sizes[k] for k in sorted(sizes, key=order))


def plan_weights(model: ModelSpec, args, gpu_name: str | None, version: str,
                 override_gib: float | None = None) -> WeightsPlan:
    """(per-rank weight bytes, assumptions) for a plan: ``--weights-gib`` if given, else ``estimate_weights``
    with the checkpoint directory of the command or the HF cache when it has safetensors files."""
    from kvplan.models.weights import checkpoint_dir_of, override_bytes

    if override_gib is not None:
        b = override_bytes(override_gib)
        return WeightsPlan.given(b, (f"weights {gib_str(b)} GiB per rank from --weights-gib (per rank)",))
    est = estimate_weights(model, args, platform_of(gpu_name), version, checkpoint_dir_of(model, args.model_path),
                           gpu_name)
    refusal = quant_refusal(model, gpu_name, version)
    notes = (refusal, *est.assumptions) if refusal else est.assumptions
    return WeightsPlan.estimated(est.bytes_per_rank, notes, est.exact, observed_weights_fraction("sglang"))


def model_weights_bytes(model: ModelSpec, args, gpu_name: str | None, version: str) -> int | None:
    """The estimate without any override (what a log's weight figure is compared with), None if unknown."""
    from kvplan.errors import KvplanError

    try:
        return plan_weights(model, args, gpu_name, version).bytes
    except KvplanError:
        return None


def redundant_expert_bytes(model: ModelSpec, args, gpu_name: str | None, version: str) -> int:
    """EPLB's redundant experts per rank inside the weight estimate (the memoized one ``plan_weights`` made)."""
    from kvplan.models.weights import checkpoint_dir_of

    if not getattr(args, "ep_num_redundant_experts", 0) or model.moe is None:
        return 0
    from kvplan.errors import KvplanError

    try:  # with --weights-gib the estimate may be out of reach: the term is then unknown (0)
        est = estimate_weights(model, args, platform_of(gpu_name), version, checkpoint_dir_of(model, args.model_path))
    except KvplanError:
        return 0
    return int(est.parts.get("eplb_redundant_experts", 0))


def nextn_layer_bytes(model: ModelSpec, args, cluster_platform: str, version: str,
                      checkpoint_dir: str | None) -> tuple[int, dict[str, int]]:
    """Per-rank bytes of the NextN/MTP layers SGLang's draft worker builds for ``--speculative-algorithm EAGLE``
    on a DeepSeek-V3-class target (https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/models/
    deepseek_nextn.py::DeepseekModelNextN): one decoder layer each (MoE, sharded like the target's), enorm, hnorm,
    shared_head.norm and ``eh_proj`` (an ``nn.Linear`` [H, 2H] in the model dtype, whole on every rank); embed_tokens
    and the head are the target's (``eagle_worker.py::EAGLEWorker.__init__`` → ``set_embed_and_head``)."""
    v = Version(version)
    platform = cluster_platform if cluster_platform in ("cuda", "rocm", "cpu") else platform_of(cluster_platform)
    wa = WeightArgs.of(args)
    t = load_tensors(model, checkpoint_dir)
    groups = hold_in_dtype(t.groups, runtime_dtype(model, wa))
    lay, _ = _layout(model, wa, v)
    n, k = model.num_layers, model.num_nextn_predict_layers
    lay = replace(lay, n_layers=n + k)
    fused = _fused_shared(model, wa, lay, v, platform)

    def rule(g: TensorGroup, r: Role) -> tuple[str | None, str | None]:
        if fused and r.group == "shared_experts":
            return ("expert_row" if r.kind == "row" else "expert_col"), "experts"
        return None, None

    place = placer(lay, rule)
    shared = ("embed_tokens", "shared_head.head", "eh_proj")
    mine = tuple(g for g in groups if g.layer is not None and g.layer >= n and not any(s in g.template for s in shared))

    def fplace(g: TensorGroup) -> Placement | None:
        p = place(g)
        if fused and p is not None and role_of(g).group == "shared_experts":
            p = replace(p, per_rank_count=cdiv(fused, lay.ep))
        return p

    parts = dict(per_rank_sum(mine, fplace, [range(n, n + k)]).stages[0])
    elem = 2 if runtime_dtype(model, wa) in ("BF16", "F16") else 4
    parts["eh_proj"] = k * 2 * model.hidden_size * model.hidden_size * elem
    if model.is_mla:  # post_load_weights keeps w_kc / w_vc for the NextN layer too (bf16 on CUDA >= 0.4.8)
        heads = model.num_attention_heads // lay.attn_tp
        parts["mla_w_kc_w_vc"] = k * heads * (model.qk_nope_head_dim + model.v_head_dim) * model.kv_lora_rank * 2
    return sum(parts.values()), parts
