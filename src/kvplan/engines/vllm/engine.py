"""vLLM engine: launch command -> VLLMArgs -> per-rank budget -> blocks, tokens, concurrency -> Plan."""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kvplan.engines.base import Engine
from kvplan.engines.cmdline import Flag, LaunchCommand
from kvplan.engines.vllm import deploy, launch, server
from kvplan.engines.vllm.rules import NEWEST
from kvplan.result import (
    Plan,
)

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.levers import LeverInputs, LeverSpec
    from kvplan.engines.loggpu import LogGpu
    from kvplan.engines.results import Comparison, PlanSetting, ServingDialect, SliderView, StartupDialect
    from kvplan.engines.vllm.args import VLLMArgs
    from kvplan.hostmem import LedgerRow
    from kvplan.logs.facts import LogFacts
    from kvplan.options import PlanOptions

MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server", "vllm.entrypoints.cli.main")

class VLLMEngine(Engine):
    name = "vllm"
    display_name = "vLLM"
    modules = MODULES
    cli = "vllm"
    launch_hint = "`vllm serve MODEL ...` or `python -m vllm.entrypoints.openai.api_server --model ...`"
    findings_package = "kvplan.engines.vllm.findings"
    scheduler_policy = "kvplan.simulate.policy.vllm_api"  # its scheduler (V1) for kvplan simulate / tune
    # each raises before the "GPU KV cache size" line: v1/worker/utils.py::request_memory at worker start, and
    # v1/engine/core.py::EngineCore._initialize_kv_caches runs get_kv_cache_configs (_check_enough_kv_cache_memory)
    # before update_kv_cache_capacity logs the size (0.32): the line contradicts them (V0 logs "# GPU blocks" before
    # raise_if_cache_size_invalid, so explain also needs a log without error lines)
    startup_refusals = ("max-model-len-unfit", "gpu-util-startup-fail", "kv-pool-empty")  # findings/
    newest_version = NEWEST
    launch_markers = launch.LAUNCH_MARKERS
    startup_phases = launch.PHASES
    log_signature = launch.SIGNATURE
    process_titles = launch.PROCESS_TITLES

    def spread_era(self, version: str | None) -> str:
        """V0 (0.6-0.7), the V1 snapshot eras (0.8-0.10), the after-init snapshot (0.11-0.20), the profiling
        change of 0.21 (engines/vllm/profiled.py)."""
        from kvplan.engines.spreads import minor_of

        minor = minor_of(version)
        if minor is None:
            return "?"
        return "0.6-0.7 (V0)" if minor < 8 else "0.8-0.10" if minor < 11 else "0.11-0.20" if minor < 21 else "0.21+"
    shm_prefixes = launch.SHM_PREFIXES
    image_entrypoints = deploy.ENTRYPOINTS
    image_hints = deploy.IMAGE_HINTS
    env_prefixes = deploy.ENV_PREFIXES
    default_port = 8000
    bare_openai_server = True
    metrics = server.METRICS

    def parse(self, cmd: LaunchCommand) -> VLLMArgs:
        from kvplan.engines.vllm.args import parse_vllm

        return parse_vllm(cmd)

    def flag_table(self) -> tuple[Flag, ...]:
        from kvplan.engines.vllm.args import FLAGS

        return FLAGS

    def default_version(self) -> tuple[str, str]:
        from kvplan.engines.vllm.rules import default_version

        return default_version()

    def plan_argv(self, model: str, tp: int, dp: int, pp: int) -> list[str] | None:
        argv = ["vllm", "serve", model, "--tensor-parallel-size", str(tp)]
        if dp > 1:
            argv += ["--data-parallel-size", str(dp)]
        if pp > 1:
            argv += ["--pipeline-parallel-size", str(pp)]
        return argv

    def plan_settings(self) -> tuple[PlanSetting, ...]:
        from kvplan.engines.vllm.plan_settings import SETTINGS

        return SETTINGS

    def launch_model(self, cmd: LaunchCommand) -> str | None:
        return self.parse(cmd).model

    def slider_flags(self, sliders: Mapping[str, Any]) -> dict[str, str | None]:
        from kvplan.engines.vllm import sliders as page

        return page.flags(sliders)

    def slider_view(self, plan: Plan) -> SliderView:
        from kvplan.engines.vllm import sliders as page

        return page.view(plan)

    def startup_free_bytes(self, gpu_total_bytes: int) -> int | None:
        from kvplan.engines.vllm.startup import free_at_startup_bytes

        return free_at_startup_bytes(gpu_total_bytes)

    def serving_dialect(self) -> ServingDialect:
        from kvplan.engines.vllm import serving

        return serving

    def log_dialect(self) -> StartupDialect:

        from kvplan.engines.vllm import log

        return log

    def launch_argv(self, model: str, flags: Sequence[str]) -> list[str]:
        return ["vllm", "serve", model, *flags]

    def log_flags(self, args: Mapping[str, Any]) -> list[str]:

        from kvplan.engines.vllm import from_log

        return from_log.log_flags(args)

    def observed_inputs(self, facts: LogFacts, missing: list[str]) -> dict[str, float]:

        from kvplan.engines.vllm import from_log

        return from_log.observed_inputs(facts, missing)

    def explain_notes(self, facts: LogFacts, version: str, version_known: bool,
                      command: Sequence[str] | None) -> list[str]:
        from kvplan.engines.loggaps import parallel_gap

        gap = parallel_gap(facts, ("tensor_parallel_size", "pipeline_parallel_size"),
                           "-tp / --tensor-parallel-size / -pp / --pipeline-parallel-size", command)
        return [gap] if gap else []

    def log_gpu(self, facts: LogFacts) -> LogGpu | None:
        from kvplan.engines.vllm import gpu_from_log

        return gpu_from_log.log_gpu(facts)

    def logged_kv_tokens(self, plan: Plan) -> int:
        return plan.per_replica.kv_tokens  # "GPU KV cache size": one engine (the minimum across its workers)

    def observed_kv_tokens(self, facts: LogFacts, plan: Plan | None) -> int | None:
        tokens = super().observed_kv_tokens(facts, plan)
        if tokens is None and facts.gpu_blocks and plan is not None:  # V0 prints blocks, not tokens
            from kvplan.engines.vllm.settings import vllm_settings

            tokens = facts.gpu_blocks * vllm_settings(plan).block_size
        return tokens

    def observed_extra(self, facts: LogFacts) -> dict[str, Any]:
        return {"kv_blocks": facts.gpu_blocks, "max_concurrency": facts.max_concurrency,
                "concurrency_len": facts.concurrency_len}

    def predicted_extra(self, plan: Plan) -> dict[str, Any]:
        return {"kv_blocks": plan.per_rank.kv_blocks, "max_concurrency": plan.per_replica.max_concurrency}

    def compare(self, facts: LogFacts, plan: Plan) -> list[Comparison]:

        from kvplan.engines.vllm import compare

        return compare.compare(facts, plan)

    def server_facts(self, info: Mapping[str, Any], cache_config: Mapping[str, str],
                     models: Sequence[Mapping[str, Any]], ignored: list[str]) -> LogFacts | None:
        return server.server_facts(cache_config, models, ignored)

    def running_cap(self, plan: Plan) -> int | None:
        from kvplan.engines.vllm.settings import vllm_settings

        return vllm_settings(plan).max_num_seqs

    def pool_scope(self, plan: Plan) -> str:
        return "per engine"

    def levers(self, inputs: LeverInputs, skipped: list[str]) -> Iterator[LeverSpec]:
        from kvplan.engines.vllm import levers

        return levers.levers(inputs, skipped)

    def kv_cache_on_host(self, plan: Plan) -> tuple[str, str] | None:
        return launch.kv_cache_on_host(plan)

    def resize_kv_cache_on_host(self, plan: Plan, gib_per_rank: int) -> tuple[str, str]:
        return launch.resize_kv_cache_on_host(plan, gib_per_rank)

    def report_rows(self, plan: Plan) -> list[tuple[str, str, str]]:

        from kvplan.engines.vllm import report

        return report.rank_rows(plan)

    def stack_documents(self, doc: Any, source: str, notes: list[str]) -> tuple[str, list[dict]] | None:
        from kvplan.engines.vllm import kserve, prodstack

        if prodstack.is_values(doc):
            return prodstack.CHART, prodstack.to_kube(doc, source, notes)
        if kserve.is_llmisvc(doc):
            return kserve.STACK, kserve.to_kube(doc, source, notes)
        return None

    def node_servers(self, doc: Any, source: str) -> tuple[str, int, str, dict[str, dict[str, str]]] | None:
        from kvplan.engines.vllm import lmcache_operator

        return lmcache_operator.node_server(doc, source) if lmcache_operator.is_engine(doc) else None

    def cgroup_note(self, plan: Plan) -> str | None:
        return deploy.cgroup_note(plan)

    def ipc_shm_bytes(self, plan: Plan) -> int | None:
        return deploy.ipc_shm_bytes(plan)

    def host_node_labels(self, plan: Plan) -> tuple[str, str]:
        from kvplan.engines.vllm import report

        return report.host_node_labels(plan)

    def host_ledger(self, plan: Plan) -> tuple[LedgerRow, ...]:
        from kvplan.engines.vllm import ledger

        return ledger.host_ledger(plan)

    def describe_host_tiers(self, plan: Plan) -> list[str]:

        from kvplan.engines.vllm import report

        return report.host_tiers(plan)

    def plan(self, cmd: LaunchCommand, options: PlanOptions, args: VLLMArgs | None = None) -> Plan:
        from kvplan.engines.vllm.planner import build_plan

        return build_plan(self.name, cmd, options, args)

    def rewrite(self, cmd: LaunchCommand, flags: dict[str, str | None]) -> str:
        from kvplan.engines.cmdline import rewrite_flags

        env_changes = {k: v for k, v in flags.items() if not k.startswith("-")}
        flag_changes = {k: v for k, v in flags.items() if k.startswith("-")}
        tokens = rewrite_flags(cmd, flag_changes, self.flag_table())
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
