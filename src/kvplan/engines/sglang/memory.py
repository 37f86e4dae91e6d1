"""What one SGLang rank allocates on its GPU, step by step as the engine does it.

0.5.23: ``mem_cache/kv_cache_configurator.py::KVCacheConfigurator._profile_available_bytes`` →
``config_from_budget`` → ``_apply_token_constraints`` → ``resolve_max_num_reqs``;
≤0.5.15: ``model_runner(_kv_cache_mixin).py::profile_max_num_token`` / ``init_memory_pool``.

    rest   = F - P × (1 - mem_fraction_static) - mm_reservation      (GiB; F = P - weights)
    tokens = floor(rest_bytes / cell) // page_size × page_size, then min(--max-total-tokens)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvplan.engines.sglang import calibration as cal
from kvplan.engines.sglang.args import SGLangArgs
from kvplan.engines.sglang.cell import Cell, compute_cell
from kvplan.engines.sglang.eplb import eplb_gpu
from kvplan.engines.sglang.lora import LoraPlan, plan_lora
from kvplan.engines.sglang.pd import plan_pd
from kvplan.engines.sglang.req_pool import req_pool
from kvplan.engines.sglang.rules import SGLangRules, mla_layout_problem
from kvplan.engines.sglang.speculative import SpecPlan, plan_speculative
from kvplan.engines.spreads import residual_fraction
from kvplan.errors import KvplanError
from kvplan.hardware.cluster import Cluster
from kvplan.models.spec import ModelSpec
from kvplan.models.weights_band import MODEL_RESIDUAL_FRACTION
from kvplan.result import RankTerm
from kvplan.units import GiB, MiB


@dataclass(frozen=True)
class PoolSize:
    """What one (P, W) pair leaves for the pools (``PoolSizing.size``)."""

    slack_bytes: int
    rest_bytes: int  # for KV after the Mamba state pool
    mamba_slots: int | None
    mamba_bytes: int
    kv_tokens: int


@dataclass(frozen=True)
class PoolSizing:
    """The KV pool's token count as a function of P (free memory before the weights) and W (the weights), every
    other input of the launch fixed: the steps of ``KVCacheConfigurator._profile_available_bytes`` ->
    ``config_from_budget`` (0.5.23; ``profile_max_num_token`` ≤0.5.15), in the engine's order:

        slack = int(P × (1 − mem_fraction_static))
        rest  = P − W − slack − mm_reservation
        Mamba state (hybrid linear, rest > 0): slots = --max-mamba-cache-size // attn_dp, else
              (int((rest × r/(1+r) − s) // s) with the padding slot, int(rest × r/(1+r) // s) without; s = bytes per
              slot, r = --mamba-full-memory-ratio); rest −= (slots + padding) × s  (``_handle_max_mamba_cache``)
        tokens = max(0, rest) // cell // page × page, then min(--max-total-tokens // page × page)

    ``plan_gpu`` sizes the pool with it, and ``kv_tokens_band`` moves P and W to their ends through the same
    function: the band is the plan's own arithmetic, not a second formula."""

    mem_fraction_static: float
    mm_reservation_bytes: int
    bytes_per_token: int
    page_size: int
    max_total_tokens: int | None
    mamba_slot_bytes: int  # 0: no Mamba state pool
    max_mamba_cache_size: int | None
    attn_dp_size: int
    mamba_full_memory_ratio: float
    mamba_padding_slot: bool
    reserved_bytes: int = 0  # built before the profile like the weights (EPLB's recorder, eplb.py)
    lora_bytes: int = 0  # LoRA buffers, allocated after the weights and before the KV pool is profiled (lora.py)

    def size(self, p_bytes: int, w_bytes: int) -> PoolSize:
        slack = int(p_bytes * (1 - self.mem_fraction_static))
        rest = p_bytes - w_bytes - slack - self.mm_reservation_bytes - self.reserved_bytes - self.lora_bytes
        mamba_slots, mamba_bytes = None, 0
        per_slot = self.mamba_slot_bytes
        if per_slot and rest > 0:
            if self.max_mamba_cache_size:
                mamba_slots = self.max_mamba_cache_size // self.attn_dp_size
            else:  # kv_cache_configurator.py::_handle_max_mamba_cache: rest × r/(1+r) for the state pool
                r = self.mamba_full_memory_ratio
                budget = rest * r / (1 + r)
                mamba_slots = int((budget - per_slot) // per_slot) if self.mamba_padding_slot \
                    else int(budget // per_slot)
            mamba_bytes = (mamba_slots + (1 if self.mamba_padding_slot else 0)) * per_slot
            rest -= mamba_bytes
        page = self.page_size
        tokens = max(0, rest) // self.bytes_per_token // page * page if self.bytes_per_token else 0
        if self.max_total_tokens and tokens > self.max_total_tokens:
            tokens = self.max_total_tokens // page * page
        return PoolSize(slack, rest, mamba_slots, mamba_bytes, int(tokens))


@dataclass(frozen=True)
class GpuPool:
    cell: Cell
    mem_fraction_static: float
    mfs_source: str
    baseline_free_bytes: int
    weights_bytes: int
    rest_bytes: int  # budget for KV (and Mamba state) after weights and the slack
    kv_tokens: int
    swa_tokens: int | None
    mamba_slots: int | None
    mamba_bytes: int
    page_size: int
    context_len: int
    max_running_requests: int
    req_to_token_slots: int
    req_to_token_bytes: int
    kv_pool_bytes: int
    slack_bytes: int
    graph_bytes: int
    graph_source: str
    chunked_prefill_size: int | None
    cuda_graph_max_bs: int | None
    assumptions: tuple[str, ...]
    # the band's inputs: P (free before weights) and the weights at their ends (equal to the value when exact)
    baseline_free_low_bytes: int = 0
    baseline_free_high_bytes: int = 0
    weights_low_bytes: int = 0
    weights_high_bytes: int = 0
    sizing: PoolSizing | None = None  # tokens as a function of (P, W): the band's arithmetic
    terms: tuple[RankTerm, ...] = ()  # what launch features add (eplb.py, pd.py)
    spec: SpecPlan | None = None  # the draft worker (speculative.py)
    draft_kv_pool_bytes: int = 0  # the draft's own token_to_kv_pool
    lora: LoraPlan | None = None  # LoRA buffers (lora.py)

    @property
    def draft_bytes(self) -> int:
        """What the draft worker takes outside the static pool: its weights (built after the target's pool), and
        its KV unless the version budgets it inside (``SpecPlan.in_static``)."""
        if self.spec is None:
            return 0
        return self.spec.weights_bytes + (0 if self.spec.in_static else self.draft_kv_pool_bytes)

    @property
    def draft_kv_in_static_bytes(self) -> int:
        return self.draft_kv_pool_bytes if self.spec is not None and self.spec.in_static else 0

    @property
    def estimated_inputs(self) -> bool:
        return (self.baseline_free_low_bytes, self.weights_low_bytes) != (self.baseline_free_high_bytes,
                                                                          self.weights_high_bytes)

    @property
    def headroom_after_pools_bytes(self) -> int:
        unused = max(0, self.rest_bytes - self.kv_pool_bytes - self.mamba_bytes - self.draft_kv_in_static_bytes)
        return self.slack_bytes + unused - self.req_to_token_bytes - int(cal.POOL_MISC.value_gib * GiB) \
            - self.draft_bytes

    @property
    def headroom_after_graphs_bytes(self) -> int:
        return self.headroom_after_pools_bytes - self.graph_bytes


def _mamba_per_slot(model: ModelSpec, args: SGLangArgs, cell: Cell) -> int:
    if not model.linear or not cell.linear_layers_local:
        return 0
    return model.linear.per_rank_bytes(args.attn_tp_size) * cell.linear_layers_local


def plan_gpu(model: ModelSpec, args: SGLangArgs, cluster: Cluster, rules: SGLangRules, version: str,
             weights_gib: float | None = None, free_gib: float | None = None) -> GpuPool:
    notes: list[str] = []
    if model.is_mla and (why := mla_layout_problem(version, args.unknown_flags)):
        raise KvplanError(f"{why}; kvplan does not model that layout",
                          "plan the MLA layout: add --enable-mla (0.3.0) or drop --disable-mla")
    cell = compute_cell(model, args)
    ctx = args.context_length or model.context_len
    try:
        from kvplan.engines.sglang.defaults import DefaultsInput, resolve_defaults

        d = resolve_defaults(DefaultsInput(
        version=version, gpu_mem_mib=cluster.gpu_mem_mib, tp=args.tp_size, pp=args.pp_size, dp=args.dp_size,
        enable_dp_attention=args.enable_dp_attention, is_mla=model.is_mla, is_multimodal=model.is_multimodal,
        vit_layers=model.vit_layers, vit_hidden=model.vit_hidden, speculative_algorithm=args.speculative_algorithm,
        chunked_prefill_size=args.chunked_prefill_size, cuda_graph_max_bs=args.cuda_graph_max_bs,
        max_running_requests=args.max_running_requests, disable_cuda_graph=args.disable_cuda_graph,
        context_len=ctx))
    except (ValueError, ImportError) as e:
        if args.mem_fraction_static is None:
            raise KvplanError(f"SGLang {version}: cannot reproduce the default mem_fraction_static ({e})",
                              "pass --mem-fraction-static explicitly in the launch command") from None
        d = None
    if args.mem_fraction_static is not None:
        mfs, mfs_src = args.mem_fraction_static, "--mem-fraction-static"
    else:
        assert d is not None  # without the version's default an explicit fraction was required above
        mfs, mfs_src = d.mem_fraction_static, f"SGLang {version} default ({d.rule})"
    ranks_node = min(args.world_size, cluster.gpus_per_node)
    if free_gib is not None:
        p_bytes = int(free_gib * GiB)
        p_lo = p_hi = p_bytes
        notes.append(f"free memory before weights P = {free_gib} GiB per rank (--free-gib)")
    else:
        base = cal.baseline_overhead(cluster.gpu_name, ranks_node)
        p_bytes = cluster.gpu_mem_bytes - base.value_bytes
        p_lo, p_hi = cluster.gpu_mem_bytes - base.high_bytes, cluster.gpu_mem_bytes - base.low_bytes
        notes.append(f"free memory before weights P = {p_bytes / GiB:.2f} GiB per rank "
                     f"({(cluster.gpu_mem_bytes - base.high_bytes) / GiB:.2f}-"
                     f"{(cluster.gpu_mem_bytes - base.low_bytes) / GiB:.2f}): GPU total minus "
                     f"{base.value_gib:.2f} GiB context and communicators ({base.source}; --free-gib sets it)")
    from kvplan.engines.sglang.weights import plan_weights, redundant_expert_bytes

    wp = plan_weights(model, args, cluster.gpu_name, version, weights_gib)
    w_bytes = wp.bytes
    notes.extend(wp.notes)
    feat = eplb_gpu(model, args, redundant_expert_bytes(model, args, cluster.gpu_name, version))
    notes.extend(feat.notes)
    spec = plan_speculative(model, args, version, cluster.gpu_name, cell.kv_dtype_bytes)
    lora = plan_lora(model, args, version)
    notes.extend((spec.notes if spec else ()) + (lora.notes if lora else ()))
    page = args.page_size or (64 if (args.attention_backend or "") in ("flashmla", "trtllm_mla", "cutlass_mla")
                              else 1)
    sizing = PoolSizing(
        mem_fraction_static=mfs, mm_reservation_bytes=100 * MiB if (rules.mm_reservation and model.is_multimodal)
        else 0, bytes_per_token=spec.sizing_cell(
        cell.bytes_per_token, cell.layers_local - cell.linear_layers_local, version) if spec
        else cell.bytes_per_token, page_size=page, max_total_tokens=args.max_total_tokens,
        mamba_slot_bytes=_mamba_per_slot(model, args, cell), max_mamba_cache_size=args.max_mamba_cache_size,
        attn_dp_size=args.attn_dp_size, mamba_full_memory_ratio=args.mamba_full_memory_ratio,
        mamba_padding_slot=rules.mamba_padding_slot, reserved_bytes=feat.reserved_bytes,
        lora_bytes=lora.bytes if lora else 0)
    size = sizing.size(p_bytes, w_bytes)
    slack, rest, mamba_slots, mamba_bytes, tokens = (size.slack_bytes, size.rest_bytes, size.mamba_slots,
                                                     size.mamba_bytes, size.kv_tokens)
    swa_tokens = None
    if cell.hybrid_swa:
        swa_tokens = int(args.swa_full_tokens_ratio * tokens) // page * page
    # req_pool.py: per-version sizing of max_running / req_to_token (speculation: its 48 default, wider rows)
    r_args = replace(args, max_running_requests=spec.max_running_requests) if spec and spec.max_running_requests \
        else args
    rp = req_pool(tokens, ctx, r_args, rules, spec.num_draft_tokens if spec else 0)
    mrr, slots = rp.max_running_requests, rp.rows
    if mamba_slots is not None and tokens:
        ratio = 1 if args.disable_radix_cache else 5  # extra_buffer strategy with the overlap scheduler
        mrr = min(mrr, max(1, mamba_slots // ratio))
    g = cal.graph_estimate(model.moe is not None, model.param_count)
    graph = 0 if args.disable_cuda_graph else int(g.value_gib * GiB)
    num_reqs = rp.rows - (1 if rules.max_running_rule in ("pool+1", "pool") else 0)  # max_num_reqs (req_pool.py)
    pd = plan_pd(args, version, num_reqs, rp.cols, mrr, graph, model.hidden_size, model.dtype_bytes)
    terms = feat.terms + (pd.terms if pd else ())
    if pd:
        notes.extend(pd.notes)
        slots += pd.prealloc_rows
        graph = 0 if pd.graphs_off else graph
    r2t = slots * rp.cols * 4 if pd else rp.bytes  # int32 rows × (context + 4)
    # every KV buffer has one extra page (slot 0 absorbs padded writes)
    if cell.hybrid_swa and swa_tokens is not None:
        pool = ((tokens + page) * cell.full_layer_bytes * cell.n_full
                + (swa_tokens + page) * cell.swa_layer_bytes * cell.n_swa)
    else:
        pool = (tokens + page) * cell.bytes_per_token if tokens else 0
    return GpuPool(cell=cell, mem_fraction_static=mfs, mfs_source=mfs_src, baseline_free_bytes=p_bytes,
                   weights_bytes=w_bytes, rest_bytes=rest, kv_tokens=int(tokens), swa_tokens=swa_tokens,
                   mamba_slots=mamba_slots, mamba_bytes=mamba_bytes, page_size=page, context_len=ctx,
                   max_running_requests=mrr, req_to_token_slots=slots, req_to_token_bytes=r2t,
                   kv_pool_bytes=pool, slack_bytes=slack, graph_bytes=graph,
                   graph_source=f"{g.value_gib} GiB: {g.what}",
                   chunked_prefill_size=d.chunked_prefill_size if d else args.chunked_prefill_size,
                   cuda_graph_max_bs=d.cuda_graph_max_bs if d else args.cuda_graph_max_bs, assumptions=tuple(notes),
                   baseline_free_low_bytes=p_lo, baseline_free_high_bytes=p_hi, weights_low_bytes=wp.low_bytes,
                   weights_high_bytes=wp.high_bytes, sizing=sizing, terms=terms, spec=spec,
                   draft_kv_pool_bytes=spec.kv_pool_bytes(int(tokens), page) if spec else 0, lora=lora)


def kv_tokens_band(gpu: GpuPool) -> tuple[int, int]:
    """(low, high) KV tokens per rank: the pool sized (``PoolSizing.size``, the plan's own arithmetic) with P at its
    low end and the weights at their high end, then the reverse (``rest = P × mfs − W`` is monotone in both); each
    input moved alone, their token differences added in quadrature with the residual the terms leave unexplained
    (``engines.spreads`` ``residual``: the quantile of it over the logs that print P, W and the K+V size;
    ``MODEL_RESIDUAL_FRACTION`` without enough logs; a fraction of the tokens):

        lo = tokens − sqrt(Σ max(0, tokens − tokens(P_lo, W), tokens − tokens(P, W_hi), resid)²)
        hi = tokens + sqrt(Σ max(0, tokens(P_hi, W) − tokens, tokens(P, W_lo) − tokens, resid)²)

    The value itself when both are exact (``--free-gib`` and ``--weights-gib``, e.g. a log's figures)."""
    if not gpu.estimated_inputs or gpu.sizing is None:
        return gpu.kv_tokens, gpu.kv_tokens
    p0, w0 = gpu.baseline_free_bytes, gpu.weights_bytes

    def tokens(p: int, w: int) -> int:
        return gpu.sizing.size(p, w).kv_tokens if gpu.sizing else gpu.kv_tokens

    # the two inputs' errors are independent (context/communicators vs tensors): each moved alone, then added in
    # quadrature
    down = [gpu.kv_tokens - tokens(gpu.baseline_free_low_bytes, w0), gpu.kv_tokens - tokens(p0, gpu.weights_high_bytes)]
    up = [tokens(gpu.baseline_free_high_bytes, w0) - gpu.kv_tokens, tokens(p0, gpu.weights_low_bytes) - gpu.kv_tokens]
    resid = int(residual_fraction("sglang", MODEL_RESIDUAL_FRACTION) * gpu.kv_tokens)  # what P and W leave unexplained
    lo = gpu.kv_tokens - int(math.sqrt(sum(max(0, d) ** 2 for d in down + [resid])))
    hi = gpu.kv_tokens + int(math.sqrt(sum(max(0, u) ** 2 for u in up + [resid])))
    return max(0, lo), hi
