"""Hybrid linear-attention models (gated DeltaNet) in vLLM V1: the attention block size vLLM raises so that an
attention page holds one layer's recurrent state, the padded state page, and the blocks a request holds.

Model-side facts (state shapes before TP) come from ``models.spec.LinearAttnSpec``; this module adds vLLM's rules:

- state of one GDN layer on one rank (``layers/mamba/mamba_utils.py::MambaStateShapeCalculator.
  gated_delta_net_state_shape``): conv ``(K − 1) × conv_dim/TP`` + temporal ``(V heads/TP) × d_k × d_v``;
  dtypes (``MambaStateDtypeCalculator.gated_delta_net_state_dtype``): both ``--mamba-cache-dtype`` ("auto" = the
  model dtype); from 0.18 the temporal state follows ``--mamba-ssm-cache-dtype`` ("auto" = the conv dtype);
- block size (``model_executor/models/config.py::HybridAttentionMambaModelConfig.verify_and_update_config``
  up to 0.26, ``platforms/interface.py::Platform._align_hybrid_block_size`` from 0.27)::

      attn_1tok  = 2 × kv_heads/TP × head_dim × kv_bytes            (FullAttentionSpec, block_size=1)
      align      = 16 (< 0.27) | max(16, block_size) (>= 0.27; CPU: max(16, 128 or --block-size))
      attn_block = align × ceil(state / (align × attn_1tok)); kept when --block-size is larger
      page       = attn_block × attn_1tok      (the state page is padded to it: mamba_page_size_padded)

- a request holds one state block per linear-attention group (``v1/kv_cache_interface.py::MambaSpec.
  max_memory_usage_bytes``); with prefix caching in mamba "align" mode (0.32 default) two.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.versions import Version
from kvplan.engines.vllm.args import VLLMArgs
from kvplan.engines.vllm.kvcache import cdiv
from kvplan.errors import KvplanError
from kvplan.models.spec import ModelSpec

# get_kv_cache_torch_dtype / STR_DTYPE_TO_TORCH_DTYPE for the mamba cache dtypes (config/cache.py MambaDType)
_STATE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
KERNEL_ALIGN = 16  # FlashAttention / FlashInfer / CPU attention: MultipleOf(16) kernel blocks


@dataclass(frozen=True)
class HybridPages:
    """One rank's hybrid page arithmetic."""

    block_size: int  # attention tokens per block after vLLM's fix-up
    block_source: str
    state_bytes: int  # one linear layer's recurrent state on this rank (unpadded MambaSpec page)
    page_bytes: int  # attention page = padded state page
    state_blocks: int  # blocks one request holds per linear-attention group
    state_block_tokens: int  # MambaSpec.block_size (mamba_block_size): max_model_len, or the block in align mode
    notes: tuple[str, ...] = ()


def _state_dtype_bytes(flag: str | None, fallback: int, what: str) -> int:
    d = (flag or "auto").lower()
    if d == "auto":
        return fallback
    if d not in _STATE_BYTES:
        raise KvplanError(f"{what} {flag!r} is not a vLLM mamba cache dtype", "use auto, float32, float16 or bfloat16")
    return _STATE_BYTES[d]


def state_bytes(model: ModelSpec, args: VLLMArgs, version: str, model_bytes: int) -> tuple[int, str]:
    """Bytes of one gated-DeltaNet layer's state on one TP rank, and the dtypes used (see the module docstring;
    https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/model_executor/layers/mamba/mamba_utils.py,
    https://github.com/vllm-project/vllm/blob/v0.18.0/vllm/model_executor/layers/mamba/mamba_utils.py)."""
    lin = model.linear
    if lin is None or lin.kind != "gdn":
        raise KvplanError(f"{model.name}: vLLM's {lin.kind if lin else 'linear'} state layout is not modeled "
                          "(only gated DeltaNet: Qwen3-Next)")
    tp = args.tensor_parallel_size
    for what, n in (("linear conv channels", lin.conv_dim), ("linear value heads", lin.num_heads)):
        if n % tp:  # vllm.distributed.divide asserts it
            raise KvplanError(f"{model.name}: {n} {what} do not divide by --tensor-parallel-size {tp}")
    conv = _state_dtype_bytes(args.mamba_cache_dtype, model_bytes, "--mamba-cache-dtype")
    ssm = conv
    if Version(version) >= Version("0.18.0"):  # gated_delta_net_state_dtype takes mamba_ssm_cache_dtype
        ssm = _state_dtype_bytes(args.mamba_ssm_cache_dtype, conv, "--mamba-ssm-cache-dtype")
    return lin.per_rank_bytes(tp, conv, ssm), f"conv {conv} B, temporal {ssm} B per element"


def _prefix_caching(args: VLLMArgs, version: str) -> bool:
    """Whether a hybrid model runs with prefix caching (mamba "align" mode).

    - < 0.14: MambaModelConfig forces it off;
    - 0.14 - 0.31: off unless --enable-prefix-caching (ModelConfig.is_prefix_caching_supported is False for
      hybrids; 0.27 arg_utils: ``default_prefix_caching = ... and not model_config.is_hybrid``);
    - 0.32+: on by default (``is_prefix_caching_supported`` True for hybrids; installed 0.32.0 and 0.33.0 wheel).
    """
    v = Version(version)
    if v < Version("0.14.0"):
        return False
    if args.no_enable_prefix_caching:
        return False
    return args.enable_prefix_caching or v >= Version("0.32.0")


def hybrid_pages(model: ModelSpec, args: VLLMArgs, version: str, attn_1tok: int, model_bytes: int,
                 is_cpu: bool, max_model_len: int) -> HybridPages:
    """Block size, padded page and state blocks per request of a GDN hybrid on one rank (module docstring)."""
    v = Version(version)
    if v < Version("0.10.2"):
        raise KvplanError(f"vLLM {version}: hybrid gated-DeltaNet models are planned from 0.10.2 (Qwen3-Next's "
                          "first release); earlier V1 code was not read")
    if model.is_mla:
        raise KvplanError(f"{model.name}: MLA + linear-attention hybrids are not modeled for vLLM")
    if args.disable_hybrid_kv_cache_manager:  # unify_hybrid_kv_cache_specs cannot unify MambaSpec
        raise KvplanError("vLLM refuses --disable-hybrid-kv-cache-manager for a Mamba/GDN hybrid "
                          "('failed to convert the KV cache specs to one unified type')", "remove the flag")
    if args.speculative_config:
        raise KvplanError("speculative decoding with a GDN hybrid (extra conv columns and state blocks per draft "
                          "token) is not modeled for vLLM", "remove --speculative-config to plan it")
    state, dtypes = state_bytes(model, args, version, model_bytes)
    notes = [f"GDN state per layer per rank: {state:,} B ({dtypes}; layers/mamba/mamba_utils.py)"]
    align_mode = _prefix_caching(args, version)
    mode = (args.mamba_cache_mode or "none").lower()  # MambaModelConfig: "none" becomes "align" (0.32+) with
    if align_mode and mode not in ("none", "align"):  # prefix caching on, and anything becomes "none" with it off
        raise KvplanError(f"vLLM mamba cache mode {mode!r} (prefix caching of every state) is not modeled",
                          "use --mamba-cache-mode align or --no-enable-prefix-caching")
    if align_mode and Version("0.14.0") <= v < Version("0.32.0"):
        raise KvplanError(f"vLLM {version}: prefix caching of a GDN hybrid (mamba block alignment to the "
                          "prefill chunk) is not modeled", "plan it with --no-enable-prefix-caching")
    if align_mode and v >= Version("0.33.0"):
        raise KvplanError(f"vLLM {version}: with prefix caching each GDN layer may hold one more prefill-checkpoint "
                          "block, depending on the GDN prefill backend (FlashInfer), which kvplan cannot know",
                          "plan it with --no-enable-prefix-caching (or --engine-version 0.32.0)")
    user = args.block_size
    if v >= Version("0.27.0"):
        # https://github.com/vllm-project/vllm/blob/v0.27.0/vllm/platforms/interface.py
        # Platform._align_hybrid_block_size: kernel alignment = max(smallest kernel block, current block size)
        start = user or (128 if is_cpu else KERNEL_ALIGN)
        align = max(KERNEL_ALIGN, start)
    else:
        # https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/model_executor/models/config.py
        # HybridAttentionMambaModelConfig.verify_and_update_config: 16 × cdiv(mamba page, 16 × attn 1-token page)
        align, start = KERNEL_ALIGN, user or 0
    needed = align * cdiv(state, align * attn_1tok)
    if start >= needed:
        block, src = start, "--block-size" if user else ("vLLM-CPU default" if is_cpu else "CacheConfig default")
    else:
        block = needed
        src = (f"raised by vLLM so one attention page holds a GDN state ({align} × ceil({state:,} / "
               f"({align} × {attn_1tok:,} B per token)))")
    page = block * attn_1tok
    if page > state:
        notes.append(f"GDN state page padded by {100 * (page - state) / state:.2f}% to the attention page "
                     f"({page:,} B; mamba_page_size_padded)")
    # MambaSpec.max_memory_usage_bytes: 1 page (0.10-0.31, mode "none"); 2 pages in "align" mode (0.32
    # https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/kv_cache_interface.py)
    if align_mode:
        notes.append("prefix caching on (mamba cache mode 'align'): two state blocks per request per GDN group")
    return HybridPages(block, src, state, page, 2 if align_mode else 1,
                       block if align_mode else max_model_len, tuple(notes))
