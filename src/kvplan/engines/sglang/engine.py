"""SGLang engine: launch command -> SGLangArgs -> GPU pool + host pool -> Plan."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kvplan.engines.base import Engine
from kvplan.engines.cmdline import Flag, LaunchCommand
from kvplan.engines.sglang import deploy, launch, server
from kvplan.engines.sglang.args import FLAGS, SGLangArgs, parse_sglang
from kvplan.engines.sglang.hicache import HOST_RESERVE_BYTES, HostPool, largest_fitting_size_gb, plan_host
from kvplan.engines.sglang.memory import kv_tokens_band, plan_gpu
from kvplan.engines.sglang.rules import NEWEST, SGLangRules, default_version, rules_for
from kvplan.engines.sglang.settings import HiCacheSettings, SGLangSettings
from kvplan.engines.sglang.terms import feature_terms, still_unmodeled
from kvplan.errors import KvplanError
from kvplan.result import ClusterSummary, HostFix, ModelSummary, NodePlan, Plan, RankPlan, ReplicaPlan, StaticPoolBudget
from kvplan.units import GiB

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.levers import LeverInputs, LeverSpec
    from kvplan.engines.loggpu import LogGpu
    from kvplan.engines.results import Comparison, PlanSetting, ServingDialect, SliderView, StartupDialect
    from kvplan.hostmem import LedgerRow
    from kvplan.logs.facts import LogFacts
    from kvplan.options import PlanOptions

# the benchmark entry points take the same ServerArgs and build the same pools
MODULES = ("sglang.launch_server", "sglang.launch_server_v2", "sglang.bench_latency", "sglang.bench_one_batch",
           "sglang.bench_offline_throughput")


def _host_fix(host: HostPool, host_bytes: int | None, ranks: int, rules: SGLangRules) -> HostFix | None:
    """The largest --hicache-size per rank that fits the node (the 0.8 share SGLang's own auto-sizing takes,
    hicache_auto_size.py of 0.5.23); None when HiCache is off or the node's host memory is not given."""
    if not host.enabled or host_bytes is None:
        return None
    size = largest_fitting_size_gb(host_bytes, ranks, rules.host_pool_pinned_pow2)
    if size <= 0:
        return HostFix("the host has no room for a host KV tier: drop --enable-hierarchical-cache",
                       {"--enable-hierarchical-cache": None, "--hicache-size": None, "--hicache-ratio": None})
    return HostFix(f"--hicache-size {size} (decimal GB per rank: {size} × {ranks} = {size * ranks} GB per node, "
                   "0.8 of the host after SGLang's 10 GiB reserve, the share its HiCache auto-sizing takes)",
                   {"--hicache-size": str(size), "--hicache-ratio": None})


class SGLangEngine(Engine):
    name = "sglang"
    display_name = "SGLang"
    modules = MODULES
    cli = "sglang"
    launch_hint = "`python -m sglang.launch_server ...`, `sglang serve ...`"
    findings_package = "kvplan.engines.sglang.findings"
    scheduler_policy = "kvplan.simulate.policy.sglang_api"  # its scheduler for kvplan simulate / tune
    headroom_findings = ("gpu-headroom-low",)  # levers stop where it starts (findings/gpu_headroom_low.py)
    placement_findings = ("ranks-exceed-node",)  # findings/ranks_exceed_node.py
    # model_runner.py::init_memory_pool raises when no KV token fits, before it builds the pool whose constructor
    # logs "KV Cache is allocated. #tokens: N" (mem_cache/memory_pool.py): that line contradicts it
    startup_refusals = ("kv-pool-empty",)  # findings/kv_pool_empty.py
    newest_version = NEWEST
    model_flag = "--model-path"
    launch_markers = launch.LAUNCH_MARKERS
    startup_phases = launch.PHASES
    log_signature = launch.SIGNATURE
    process_titles = launch.PROCESS_TITLES
    shm_prefixes = launch.SHM_PREFIXES
    image_hints = deploy.IMAGE_HINTS
    env_prefixes = deploy.ENV_PREFIXES
    default_port = 30000
    info_paths = server.INFO_PATHS
    metrics = server.METRICS

    def spread_era(self, version: str | None) -> str:
        """0.4 and 0.5 (their memory accounting differs: engines/sglang/calibration.py)."""
        from kvplan.engines.spreads import minor_of

        if minor_of(version) is None:
            return "?"
        return "0.4" if str(version).startswith("0.4") else "0.5"

    def parse(self, cmd: LaunchCommand) -> SGLangArgs:
        return parse_sglang(cmd)

    def flag_table(self) -> tuple[Flag, ...]:
        return FLAGS

    def default_version(self) -> tuple[str, str]:
        return default_version()

    def plan_argv(self, model: str, tp: int, dp: int, pp: int) -> list[str] | None:
        argv = ["python", "-m", "sglang.launch_server", "--model-path", model, "--tp-size", str(tp)]
        if dp > 1:
            argv += ["--dp-size", str(dp)]
        if pp > 1:
            argv += ["--pp-size", str(pp)]
        return argv

    def plan_flags(self, values: Mapping[str, Any]) -> list[str]:
        flags = super().plan_flags(values)
        if values.get("hicache_size") is not None or values.get("hicache_ratio") is not None:
            flags.append("--enable-hierarchical-cache")  # a host pool size means HiCache on
        return flags

    def plan_settings(self) -> tuple[PlanSetting, ...]:
        from kvplan.engines.sglang.plan_settings import SETTINGS

        return SETTINGS

    def launch_model(self, cmd: LaunchCommand) -> str | None:
        return parse_sglang(cmd).model_path

    def slider_flags(self, sliders: Mapping[str, Any]) -> dict[str, str | None]:
        from kvplan.engines.sglang import sliders as page

        return page.flags(sliders)

    def slider_view(self, plan: Plan) -> SliderView:
        from kvplan.engines.sglang import sliders as page

        return page.view(plan)

    def serving_dialect(self) -> ServingDialect:
        from kvplan.engines.sglang import serving

        return serving

    def log_dialect(self) -> StartupDialect:
        from kvplan.engines.sglang import log

        return log

    def log_flags(self, args: Mapping[str, Any]) -> list[str]:
        from kvplan.engines.sglang import from_log

        return from_log.log_flags(args)

    def inert_flags(self, args: Mapping[str, Any]) -> list[str]:
        from kvplan.engines.sglang import from_log

        return from_log.inert_flags(args)

    def observed_inputs(self, facts: LogFacts, missing: list[str]) -> dict[str, float]:
        from kvplan.engines.sglang import from_log

        return from_log.observed_inputs(facts, missing)

    def log_gpu(self, facts: LogFacts) -> LogGpu | None:
        from kvplan.engines.sglang import gpu_from_log

        return gpu_from_log.log_gpu(facts)

    def explain_notes(self, facts: LogFacts, version: str, version_known: bool,
                      command: Sequence[str] | None) -> list[str]:
        from kvplan.engines.loggaps import parallel_gap
        from kvplan.engines.sglang import from_log

        gap = parallel_gap(facts, ("tp_size", "pp_size", "dp_size"), "--tp / --tp-size / --pp / --dp", command)
        return from_log.notes(facts, version, version_known, command) + ([gap] if gap else [])

    def predicted_extra(self, plan: Plan) -> dict[str, Any]:
        pool = plan.per_rank.static
        if pool is None:
            return {}
        return {"headroom_after_pools_gib": round(pool.headroom_after_pools_bytes / GiB, 3),
                "headroom_after_graphs_gib": round(pool.headroom_after_graphs_bytes / GiB, 3)}

    def compare(self, facts: LogFacts, plan: Plan) -> list[Comparison]:
        from kvplan.engines.sglang import compare

        return compare.compare(facts, plan)

    def server_facts(self, info: Mapping[str, Any], cache_config: Mapping[str, str],
                     models: Sequence[Mapping[str, Any]], ignored: list[str]) -> LogFacts | None:
        return server.server_facts(info, ignored)

    def metrics_facts(self, config: Mapping[str, str], model: str | None, pool_tokens: float | None,
                      ignored: list[str]) -> LogFacts | None:
        return server.metrics_facts(model, pool_tokens, ignored)

    def pool_scope(self, plan: Plan) -> str:
        g = plan.per_replica.dp_groups
        return f"per replica ({g} DP groups)" if g > 1 else "per replica"

    def levers(self, inputs: LeverInputs, skipped: list[str]) -> Iterator[LeverSpec]:
        from kvplan.engines.sglang import levers

        return levers.levers(inputs, skipped)

    def report_rows(self, plan: Plan) -> list[tuple[str, str, str]]:
        from kvplan.engines.sglang import report

        return report.rank_rows(plan)

    def cgroup_note(self, plan: Plan) -> str | None:
        return deploy.cgroup_note(plan)

    def host_ledger(self, plan: Plan) -> tuple[LedgerRow, ...]:
        from kvplan.engines.sglang import ledger

        return ledger.host_ledger(plan)

    def describe_host_tiers(self, plan: Plan) -> list[str]:
        from kvplan.engines.sglang import report

        return report.host_tiers(plan)

    def host_check_refuses(self, plan: Plan) -> str | None:
        from kvplan.engines.sglang import report

        return report.host_refusal(plan)

    def host_node_labels(self, plan: Plan) -> tuple[str, str]:
        return "host KV requested (all ranks)", "engine host reserve (HiCache keeps it free)"

    def plan(self, cmd: LaunchCommand, options: PlanOptions, args: SGLangArgs | None = None) -> Plan:
        """One plan reads each path of the filesystem once (``models.paths.view``)."""
        from kvplan.models.paths import view

        with view({}):
            return self._plan(cmd, options, args)

    def _plan(self, cmd: LaunchCommand, options: PlanOptions, args: SGLangArgs | None) -> Plan:
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
                                  options.host_mem_gib, world_size=args.world_size, limits=options,
                                  local_host=options.local_host)
        gpu = plan_gpu(model, args, cluster, rules, version, options.weights_gib, options.free_gib)
        band = kv_tokens_band(gpu)
        # ranks_per_host = launch_world_size // nnodes (the engine's own split, 0.5.20+)
        ranks_node = min(cluster.gpus_per_node, max(1, args.world_size // nodes))
        seen = cluster.host_mem_bytes  # 0.5.23's check also reads the cgroup: min(available, cgroup headroom)
        if rules.host_check == "split-by-ranks-cgroup" and cluster.container_limit_bytes is not None:
            seen = cluster.container_limit_bytes if seen is None else min(seen, cluster.container_limit_bytes)
        host = plan_host(args, rules, gpu.kv_tokens, gpu.cell.bytes_per_token, gpu.page_size, seen, ranks_node)
        budget = StaticPoolBudget(
            baseline_free_bytes=gpu.baseline_free_bytes, mem_fraction_static=gpu.mem_fraction_static,
            headroom_bytes=gpu.slack_bytes, req_to_token_bytes=gpu.req_to_token_bytes, cuda_graph_bytes=gpu.graph_bytes,
            headroom_after_pools_bytes=gpu.headroom_after_pools_bytes,
            headroom_after_graphs_bytes=gpu.headroom_after_graphs_bytes)
        rank = RankPlan(
            weights_bytes=gpu.weights_bytes, kv_bytes_per_token=gpu.cell.bytes_per_token, kv_tokens=gpu.kv_tokens,
            kv_pool_bytes=gpu.kv_pool_bytes, max_running_requests=gpu.max_running_requests, budget=budget,
            host_kv_tokens=host.tokens, host_kv_bytes=host.bytes, host_kv_pinned_bytes=host.pinned_bytes,
            swa_tokens=gpu.swa_tokens, mamba_slots=gpu.mamba_slots, kv_tokens_low=band[0], kv_tokens_high=band[1],
            feature_terms=gpu.terms + feature_terms(gpu))
        node = NodePlan(ranks=ranks_node, host_kv_bytes=host.pinned_bytes * ranks_node,
                        host_available_bytes=cluster.host_mem_bytes, host_available_source=cluster.host_mem_source,
                        host_reserve_bytes=HOST_RESERVE_BYTES if host.enabled else 0, **cluster.node_limits())
        groups = args.attn_dp_size
        avg = min(options.avg_tokens, gpu.context_len)  # no request is longer than the context length
        fit_per_group = min(gpu.kv_tokens // avg, gpu.max_running_requests) if gpu.kv_tokens else 0
        replica = ReplicaPlan(
            ranks=args.tp_size * args.pp_size, dp_groups=groups, kv_tokens=gpu.kv_tokens * groups,
            avg_tokens=avg, requests_fit=fit_per_group * groups,
            max_running_requests=gpu.max_running_requests * groups, replicas=args.replicas)
        settings = SGLangSettings(
            mem_fraction_static=gpu.mem_fraction_static, mem_fraction_static_source=gpu.mfs_source,
            kv_cache_dtype=gpu.cell.kv_dtype, page_size=gpu.page_size, context_len=gpu.context_len,
            tp_size=args.tp_size, pp_size=args.pp_size, dp_size=args.dp_size,
            attn_tp_size=args.attn_tp_size, enable_dp_attention=args.enable_dp_attention,
            kv_heads_per_rank=gpu.cell.heads_per_rank, layers_per_rank=gpu.cell.layers_local,
            chunked_prefill_size=gpu.chunked_prefill_size, cuda_graph_max_bs=gpu.cuda_graph_max_bs,
            req_to_token_slots=gpu.req_to_token_slots, cuda_graph_estimate=gpu.graph_source,
            hicache=HiCacheSettings(
                enabled=host.enabled, sizing=host.sizing, ratio=host.ratio, size_gb_per_rank=host.size_gb,
                host_check=rules.host_check, engine_budget_bytes_per_rank=host.engine_budget_bytes,
                engine_check_passes=host.engine_check_passes, pinned_pow2=rules.host_pool_pinned_pow2,
                host_must_exceed_device=rules.host_must_exceed_device),
            host_sizing=host.sizing, host_fix=_host_fix(host, cluster.host_mem_bytes, ranks_node, rules),
            unknown_flags=tuple(args.unknown_flags), unmodeled=still_unmodeled(args, gpu),
            model_path=args.model_path, world_size=args.world_size, nnodes=args.nnodes,
            # the estimate without --weights-gib: the pool's own weights when none was given
            checkpoint_weights_bytes_per_rank=gpu.weights_bytes if options.weights_gib is None
            else model_weights_bytes(model, args, cluster.gpu_name, version),
        )
        return Plan(engine=self.name, engine_version=version, version_source=vsrc, command=cmd.text(),
                    model=ModelSummary.of(model), cluster=ClusterSummary(**cluster.summary()),
                    per_rank=rank, per_node=node,
                    per_replica=replica, settings=settings,
                    assumptions=gpu.assumptions)



ENGINE = SGLangEngine()
