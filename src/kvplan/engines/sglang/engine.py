"""SGLang engine: launch command -> SGLangArgs -> GPU pool + host pool -> Plan."""

from __future__ import annotations

import shlex
from dataclasses import replace

from kvplan.engines.cmdline import LaunchCommand
from kvplan.engines.sglang.args import FLAGS, SGLangArgs, parse_sglang
from kvplan.engines.sglang.hicache import HOST_RESERVE_BYTES, HostPool, largest_fitting_size_gb, plan_host
from kvplan.engines.sglang.memory import plan_gpu
from kvplan.engines.sglang.rules import default_version, rules_for
from kvplan.errors import KvplanError
from kvplan.options import PlanOptions
from kvplan.result import NodePlan, Plan, RankPlan, ReplicaPlan

# the benchmark entry points take the same ServerArgs and build the same pools
MODULES = ("sglang.launch_server", "sglang.launch_server_v2", "sglang.bench_latency", "sglang.bench_one_batch",
           "sglang.bench_offline_throughput")


def _host_fix(host: HostPool, host_bytes: int, ranks: int, rules) -> dict | None:
    """The largest --hicache-size per rank that fits the node (SGLang 0.5.23's own 0.8 share)."""
    if not host.enabled:
        return None
    size = largest_fitting_size_gb(host_bytes, ranks, rules.host_pool_pinned_pow2)
    if size <= 0:
        return {"text": "the host has no room for a host KV tier: drop --enable-hierarchical-cache",
                "flags": {"--enable-hierarchical-cache": None, "--hicache-size": None, "--hicache-ratio": None}}
    return {"text": f"--hicache-size {size} (decimal GB per rank: {size} × {ranks} = {size * ranks} GB per node, "
                    "SGLang 0.5.23's own 0.8 share of the host after its 10 GiB reserve)",
            "flags": {"--hicache-size": str(size), "--hicache-ratio": None}}


class SGLangEngine:
    name = "sglang"

    def matches(self, cmd: LaunchCommand) -> bool:
        return cmd.runs(MODULES, "sglang")

    def parse(self, cmd: LaunchCommand) -> SGLangArgs:
        return parse_sglang(cmd)

    def plan(self, cmd: LaunchCommand, options: PlanOptions, args: SGLangArgs | None = None) -> Plan:
        from kvplan.engines.sglang.weights import model_weights_bytes
        from kvplan.hardware.cluster import resolve_cluster
        from kvplan.models.catalog import resolve_model

        args = args or parse_sglang(cmd)
        version, vsrc = (options.engine_version, "--engine-version") if options.engine_version \
            else default_version()
        rules = rules_for(version)
        model = resolve_model(args.model_path, options.model_config)
        if options.avg_tokens is not None and options.avg_tokens < 1:
            raise KvplanError(f"--avg-tokens must be >= 1, got {options.avg_tokens}")
        nodes = max(options.nodes, args.nnodes)
        cluster = resolve_cluster(options.gpu, options.gpu_mem_mib, options.gpus_per_node, nodes,
                                  options.host_mem_gib, world_size=args.world_size)
        gpu = plan_gpu(model, args, cluster, rules, version, options.weights_gib, options.free_gib)
        # ranks_per_host = launch_world_size // nnodes (the engine's own split, 0.5.20+)
        ranks_node = min(cluster.gpus_per_node, max(1, args.world_size // nodes))
        host = plan_host(args, rules, gpu.kv_tokens, gpu.cell.bytes_per_token, gpu.page_size,
                         cluster.host_mem_bytes, ranks_node)
        rank = RankPlan(
            weights_bytes=gpu.weights_bytes, baseline_free_bytes=gpu.baseline_free_bytes,
            kv_bytes_per_token=gpu.cell.bytes_per_token, kv_tokens=gpu.kv_tokens, kv_pool_bytes=gpu.kv_pool_bytes,
            headroom_bytes=gpu.slack_bytes, max_running_requests=gpu.max_running_requests,
            req_to_token_bytes=gpu.req_to_token_bytes, cuda_graph_bytes=gpu.graph_bytes,
            headroom_after_pools_bytes=gpu.headroom_after_pools_bytes,
            headroom_after_graphs_bytes=gpu.headroom_after_graphs_bytes,
            mem_fraction_static=gpu.mem_fraction_static, host_kv_tokens=host.tokens, host_kv_bytes=host.bytes,
            host_kv_pinned_bytes=host.pinned_bytes, swa_tokens=gpu.swa_tokens, mamba_slots=gpu.mamba_slots)
        node = NodePlan(ranks=ranks_node, host_kv_bytes=host.pinned_bytes * ranks_node,
                        host_available_bytes=cluster.host_mem_bytes, host_available_source=cluster.host_mem_source,
                        host_reserve_bytes=HOST_RESERVE_BYTES if host.enabled else 0, shm_bytes=cluster.shm_bytes)
        groups = args.attn_dp_size
        fit_per_group = min(gpu.kv_tokens // options.avg_tokens, gpu.max_running_requests) if gpu.kv_tokens else 0
        replica = ReplicaPlan(
            ranks=args.tp_size * args.pp_size, dp_groups=groups, kv_tokens=gpu.kv_tokens * groups,
            avg_tokens=options.avg_tokens, requests_fit=fit_per_group * groups,
            max_running_requests=gpu.max_running_requests * groups, replicas=args.replicas)
        settings = {
            "mem_fraction_static": gpu.mem_fraction_static, "mem_fraction_static_source": gpu.mfs_source,
            "kv_cache_dtype": gpu.cell.kv_dtype, "page_size": gpu.page_size, "context_len": gpu.context_len,
            "tp_size": args.tp_size, "pp_size": args.pp_size, "dp_size": args.dp_size,
            "attn_tp_size": args.attn_tp_size, "enable_dp_attention": args.enable_dp_attention,
            "kv_heads_per_rank": gpu.cell.heads_per_rank, "layers_per_rank": gpu.cell.layers_local,
            "chunked_prefill_size": gpu.chunked_prefill_size, "cuda_graph_max_bs": gpu.cuda_graph_max_bs,
            "req_to_token_slots": gpu.req_to_token_slots, "cuda_graph_estimate": gpu.graph_source,
            "hicache": {"enabled": host.enabled, "sizing": host.sizing, "ratio": host.ratio,
                        "size_gb_per_rank": host.size_gb, "host_check": rules.host_check,
                        "engine_budget_bytes_per_rank": host.engine_budget_bytes,
                        "engine_check_passes": host.engine_check_passes,
                        "pinned_pow2": rules.host_pool_pinned_pow2,
                        "host_must_exceed_device": rules.host_must_exceed_device},
            "host_sizing": host.sizing, "host_fix": _host_fix(host, cluster.host_mem_bytes, ranks_node, rules),
            "unknown_flags": list(args.unknown_flags), "unmodeled": list(args.unmodeled),
            "model_path": args.model_path, "world_size": args.world_size,
            "checkpoint_weights_bytes_per_rank": model_weights_bytes(model, args, cluster.gpu_name, version),
        }
        return Plan(engine="sglang", engine_version=version, version_source=vsrc, command=cmd.text(),
                    model=model.summary(), cluster=cluster.summary(), per_rank=rank, per_node=node,
                    per_replica=replica, settings=settings,
                    assumptions=gpu.assumptions)

    def replan(self, cmd: LaunchCommand, options: PlanOptions, **changes) -> Plan:
        """The same launch with some SGLangArgs fields changed (levers are plans, not new formulas)."""
        return self.plan(cmd, options, replace(parse_sglang(cmd), **changes))

    def rewrite(self, cmd: LaunchCommand, flags: dict[str, str | None]) -> str:
        """The user's command with flags set (value ""/"true" for booleans) or removed (None)."""
        from kvplan.engines.cmdline import rewrite_flags

        return " ".join(shlex.quote(t) for t in rewrite_flags(cmd, flags, FLAGS))


ENGINE = SGLangEngine()
