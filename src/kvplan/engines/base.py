"""The contract every engine package implements: ``Engine``, an ABC with typed results.

An engine package (``kvplan/engines/<name>/``) owns everything that is true of one serving engine and nothing
else: its launch flags and version table, its memory model, its host-tier semantics, the finding rules only its
launches can trigger, the dialect of its logs, the figures ``explain`` compares, the levers ``diagnose`` prices,
its ports, health paths and metric names. Code outside ``kvplan/engines/`` asks the registry
(``kvplan.engines.get_engine``) and never names an engine. What a third engine needs is in
docs/DEVELOPERS.md ("Adding an engine"); ``tests/fake_engine`` is a minimal complete one.

Engines import downward only (errors, units, options, result, models, hardware, logs); the import-linter
contract in pyproject.toml keeps cli, explain, diagnose, launch, report and findings out of this package.
"""

from __future__ import annotations

import importlib
import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from kvplan.engines.cmdline import LaunchCommand, flags_from_values
from kvplan.errors import KvplanError
from kvplan.result import Finding, Plan
from kvplan.units import fmt_count_band, fmt_gib

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.levers import LeverInputs, LeverSpec
    from kvplan.engines.loggpu import LogGpu
    from kvplan.engines.results import Comparison, MetricNames, PlanSetting, ServingDialect, SliderView, StartupDialect
    from kvplan.hostmem import LedgerRow
    from kvplan.logs.facts import LogFacts
    from kvplan.options import PlanOptions


class EngineArgs(Protocol):
    """What an engine's parsed launch (a frozen dataclass: SGLangArgs, VLLMArgs) offers generic code."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def world_size(self) -> int: ...


@dataclass(frozen=True)
class FindingContext:
    """What a finding rule reads: the Plan, and ``replan(**changes)`` for a what-if Plan of the same launch with
    some engine-args fields changed (a what-if is a new Plan, never a second formula)."""

    plan: Plan
    replan: Callable[..., Plan] | None = None


class FindingRule(Protocol):
    """A rule module: ``ID`` and ``check(ctx) -> list[Finding]`` (one rule per file; see findings/)."""

    ID: str

    def check(self, ctx: FindingContext) -> list[Finding]: ...


class Engine(ABC):
    """One serving engine. Subclasses set the class attributes and implement the abstract methods; every other
    method has a neutral default (no levers, no extra comparisons) that an engine overrides when it knows more."""

    name: ClassVar[str]  # registry key; Plan.engine and LogFacts.engine carry it
    display_name: ClassVar[str]  # as people write it: "SGLang", "vLLM"
    modules: ClassVar[tuple[str, ...]] = ()  # `python -m <module>` launchers
    cli: ClassVar[str | None] = None  # `<cli> serve ...`
    launch_hint: ClassVar[str] = ""  # how its launch command looks, for "not a known engine launch command"
    findings_package: ClassVar[str | None] = None  # e.g. "kvplan.engines.sglang.findings" (its RULES: position, name)
    # the module modelling this engine's scheduler for ``kvplan simulate`` / ``tune`` (kvplan.simulate.policy.Policy:
    # knobs, make_instance, levers); named, not imported, so that engines never import the simulator; None: none
    scheduler_policy: ClassVar[str | None] = None
    # warnings that mean "this much memory leaves the GPU too little room to run" (besides every error): a lever is
    # priced only up to the value where one of them (or an error) appears (kvplan.engines.levers)
    headroom_findings: ClassVar[tuple[str, ...]] = ()
    # errors that only say the launch needs more GPUs per node than the cluster has: kvplan tune reports such a
    # candidate with the GPUs it needs instead of refusing it
    placement_findings: ClassVar[tuple[str, ...]] = ()
    # errors that say the engine refuses to start before its KV pool is allocated, or allocates none: a log that
    # shows the pool allocated contradicts them (kvplan explain reports them as info on that log)
    startup_refusals: ClassVar[tuple[str, ...]] = ()

    # ---- calibration data ----
    def spread_era(self, version: str | None) -> str:
        """The engine-version range under which a budget term's error on real logs is kept (engines/spreads.json):
        versions whose memory accounting differs are kept apart; "?" when the version does not parse."""
        return "?"

    # ---- a launch ----
    def matches(self, cmd: LaunchCommand) -> bool:
        """True when ``cmd`` runs this engine (``python -m <module>`` or ``<cli> serve``)."""
        return cmd.runs(self.modules, self.cli or "")

    @abstractmethod
    def parse(self, cmd: LaunchCommand) -> EngineArgs:
        """The launch's flags and environment, resolved the engine's way (bad values raise KvplanError)."""

    @abstractmethod
    def plan(self, cmd: LaunchCommand, options: PlanOptions, args: Any = None) -> Plan:
        """What every rank, node and replica of this launch allocates (``args``: already parsed, maybe changed)."""

    def replan(self, cmd: LaunchCommand, options: PlanOptions, **changes: Any) -> Plan:
        """The same launch with some parsed-args fields changed: levers and what-ifs are Plans, not formulas.

        A measured weights figure (``options.weights_gib``: a log's "Load weight end ... mem usage", or
        ``--weights-gib``) anchors its own launch only. When the changes move the engine model's own weights
        estimate (DP attention keeps the attention block whole on every rank; another TP, PP or EP size splits the
        checkpoint differently), the what-if moves from the measured figure by the model's difference, both model
        figures planned with ``weights_gib=None`` (per rank, the heaviest stage)::

            weights(what-if) = observed + (model(what-if) − model(current))

        When the changes leave the model's estimate unchanged (a fraction, a host tier, a context length), or the
        model cannot estimate the weights without the measured figure, the measured figure is kept exactly."""
        args = self.parse(cmd)
        what_if = replace(args, **changes)
        if options.weights_gib is None or what_if == args:
            return self.plan(cmd, options, what_if)
        weights = self._moved_weights(cmd, options, args, what_if)
        if weights is None:
            return self.plan(cmd, options, what_if)
        p = self.plan(cmd, replace(options, weights_gib=weights[0]), what_if)
        return replace(p, assumptions=(*p.assumptions, weights[1]))

    def _moved_weights(self, cmd: LaunchCommand, options: PlanOptions, args: Any,
                       what_if: Any) -> tuple[float, str] | None:
        """(the what-if's weights in GiB per rank, the note saying how) for ``replan``; None: keep the measured."""
        observed = options.weights_gib
        if observed is None:
            return None
        free = replace(options, weights_gib=None)
        try:
            now = self.plan(cmd, free, args).per_rank.weights_bytes
            then = self.plan(cmd, free, what_if).per_rank.weights_bytes
        except KvplanError:
            return None
        if now == then:
            return None
        moved = max(0.0, observed + (then - now) / 2**30)
        note = (f"weights {moved:.2f} GiB per rank in this what-if: the measured {observed:.2f} GiB of the launch "
                f"+ the model's difference {(then - now) / 2**30:+.2f} GiB ({then / 2**30:.2f} − {now / 2**30:.2f})")
        return moved, note

    def default_version(self) -> tuple[str, str]:
        """(version, where it came from) when no --engine-version is given: the installed engine, else the newest
        release read."""
        return self.newest_version, "newest known (pass --engine-version)"

    def without_rejected(self, cmd: LaunchCommand, version: str) -> LaunchCommand | None:
        """The command without the flags (and values) this engine version's own argparse would reject
        (``engines/<name>/flags.json``), or None when it rejects none: what is planned when a rejected value also
        stops kvplan's parser (the engine would never start; the flag findings say why)."""
        from kvplan.engines import split_command
        from kvplan.engines.flagtable import without_rejected

        kept = without_rejected(self.name, version, cmd.args)
        if kept is None:
            return None
        return split_command([*cmd.argv[: len(cmd.argv) - len(cmd.args)], *kept])

    @abstractmethod
    def flag_table(self) -> Sequence[Any]:
        """The engine's flags (cmdline.Flag) as its argparse declares them."""

    def rewrite(self, cmd: LaunchCommand, flags: dict[str, str | None]) -> str:
        """The user's command with flags set (``""`` for a boolean flag) or removed (None), quoted for a shell."""
        from kvplan.engines.cmdline import rewrite_flags

        return " ".join(shlex.quote(t) for t in rewrite_flags(cmd, flags, self.flag_table()))

    # ---- its logs, and what explain compares ----
    newest_version: ClassVar[str] = ""  # newest release read: the assumption when a log prints no version
    model_flag: ClassVar[str] = "--model"

    @abstractmethod
    def log_dialect(self) -> StartupDialect:
        """The startup-log parser (engines/<engine>/log.py)."""

    def launch_argv(self, model: str, flags: Sequence[str]) -> list[str]:
        """A launch command for ``model`` and ``flags``: what explain runs when only a log is given."""
        program = ["python", "-m", self.modules[0]] if self.modules else [self.cli or self.name, "serve"]
        return [*program, self.model_flag, model, *flags]

    def log_flags(self, args: Mapping[str, Any]) -> list[str]:
        """Launch flags for the args a log showed (only flags this engine's model knows)."""
        return flags_from_values(args.items(), self.flag_table())

    def inert_flags(self, args: Mapping[str, Any]) -> list[str]:
        """Flags of the user's command that did nothing in the launch a log shows (their feature shown off): the
        launch rebuilt from the log leaves them out, so no command kvplan prints carries a figure that never ran."""
        return []

    def observed_inputs(self, facts: LogFacts, missing: list[str]) -> dict[str, float]:
        """PlanOptions fields from what the log measured that no planner can know in advance; what the log lacks
        is appended to ``missing`` with the estimate used instead."""
        return {}

    def log_gpu(self, facts: LogFacts) -> LogGpu | None:
        """The GPU the log ran on, from the memory figures it printed (engines/loggpu.py), for explain without
        --gpu; None when the log bounds no device total."""
        return None

    def explain_notes(self, facts: LogFacts, version: str, version_known: bool,
                      command: Sequence[str] | None) -> list[str]:
        """More assumptions explain made for this log (appended to its ``missing``)."""
        return []

    def logged_kv_tokens(self, plan: Plan) -> int:
        """The KV token figure this engine's log prints, from the plan (per rank unless the engine says otherwise)."""
        return plan.per_rank.kv_tokens

    def observed_kv_tokens(self, facts: LogFacts, plan: Plan | None) -> int | None:
        """The KV token figure the log printed (summary line, else rank 0's pool line)."""
        r = facts.first_rank()
        return facts.kv_tokens if facts.kv_tokens is not None else (r.kv_tokens if r else None)

    def observed_extra(self, facts: LogFacts) -> dict[str, Any]:
        """More log figures explain's JSON shows under ``observed`` (after kv_tokens)."""
        return {}

    def predicted_extra(self, plan: Plan) -> dict[str, Any]:
        """More plan figures explain's JSON shows under ``predicted``."""
        return {}

    def compare(self, facts: LogFacts, plan: Plan) -> list[Comparison]:
        """Log vs plan, figure by figure, each within the rounding the log's own figures allow."""
        from kvplan.engines.results import Comparison

        obs = self.observed_kv_tokens(facts, plan)
        return [] if obs is None else [Comparison("kv_tokens", "per rank", obs, self.logged_kv_tokens(plan), 0.005)]

    # ---- its serving stats ----
    launch_markers: ClassVar[tuple[str, ...]] = ()  # a log line that starts a new launch

    def serving_dialect(self) -> ServingDialect:
        """The reader of its serving-stats lines (engines/<engine>/serving.py); none by default."""
        from kvplan.engines.results import NoServing

        return NoServing()

    # ---- a launch under the watchdog ----
    startup_phases: ClassVar[tuple[tuple[str, str], ...]] = ()  # (phase, regex) in startup order (launch.phases)
    log_signature: ClassVar[str] = ""  # regex of a line only this engine prints
    process_titles: ClassVar[tuple[str, ...]] = ()  # title prefixes of its rank processes (kvplan cleanup)
    shm_prefixes: ClassVar[tuple[str, ...]] = ()  # /dev/shm names it leaves

    def kv_cache_on_host(self, plan: Plan) -> tuple[str, str] | None:
        """(where, how it is sized) when the plan's KV cache lives in host memory (vLLM's CPU platform), else None."""
        return None

    def resize_kv_cache_on_host(self, plan: Plan, gib_per_rank: int) -> tuple[str, str]:
        """(the fix in words, the fixed command) for a host-memory KV cache of ``gib_per_rank`` GiB per rank."""
        raise NotImplementedError(f"{self.display_name} keeps no KV cache in host memory")

    # ---- inside a deployment (kvplan.deploy: Docker, Compose, Kubernetes, Slurm) ----
    image_entrypoints: ClassVar[Mapping[str, tuple[str, ...]]] = {}  # image repository -> the ENTRYPOINT it runs
    image_hints: ClassVar[tuple[str, ...]] = ()  # words in an image repository that name this engine's images
    env_prefixes: ClassVar[tuple[str, ...]] = ()  # environment variables it reads (kept with the launch command)

    def stack_documents(self, doc: Any, source: str, notes: list[str]) -> tuple[str, list[dict]] | None:
        """A serving stack's own configuration for this engine (e.g. a Helm chart's values), rendered into the
        Kubernetes documents the stack makes of it: (the stack's name, the documents), or None when ``doc`` is not
        one; ``notes`` gets what is not rendered (kept with the containers rendered from ``doc``); a document's own
        notes may ride under its ``_notes`` key (kept with its containers only)."""
        return None

    def node_servers(self, doc: Any, source: str) -> tuple[str, int, str, dict[str, dict[str, str]]] | None:
        """A per-node cache server a stack's own resource runs beside this engine's pods (e.g. the LMCache
        operator's ``LMCacheEngine``): (its name, the host bytes it holds on each node, a note, the ConfigMaps its
        operator creates: name -> data), or None when ``doc`` is not one."""
        return None

    def cgroup_note(self, plan: Plan) -> str | None:
        """What this engine version's own host-memory check does about a container's cgroup limit (reads it and
        refuses, only warns, or is blind to it), for container-memory-limit; None when it makes no such check."""
        return None

    def ipc_shm_bytes(self, plan: Plan) -> int | None:
        """/dev/shm the ranks of one node need for the engine's own inter-process queues (ipc-missing compares the
        container's /dev/shm with it); None when not known."""
        return None

    # ---- a running server ----
    default_port: ClassVar[int] = 8000
    health_paths: ClassVar[tuple[str, ...]] = ("/health", "/v1/models")  # all 2xx: ready
    info_paths: ClassVar[tuple[str, ...]] = ()  # its own info endpoint(s): a JSON object identifies the engine
    bare_openai_server: ClassVar[bool] = False  # a server answering only OpenAI endpoints is this engine
    metrics: ClassVar[MetricNames | None] = None

    def server_facts(self, info: Mapping[str, Any], cache_config: Mapping[str, str],
                     models: Sequence[Mapping[str, Any]], ignored: list[str]) -> LogFacts | None:
        """What a running server's endpoints said, as LogFacts (so its launch is rebuilt like a log's): its info
        endpoint's JSON, its config-info metric labels, the /v1/models cards. Each value is checked for its type
        and range (kvplan.engines.reported); what does not fit is left out and named in ``ignored``."""
        return None

    def metrics_facts(self, config: Mapping[str, str], model: str | None, pool_tokens: float | None,
                      ignored: list[str]) -> LogFacts | None:
        """What a metrics store (Prometheus) holds about a server whose own endpoints are not read: the labels of
        its config-info metric, the value of its model label (``MetricNames.model_label``) and of its pool gauge
        (``MetricNames.pool_tokens``). By default the server facts of a model card naming that model."""
        models = [{"id": model, "root": model}] if model else []
        return self.server_facts({}, config, models, ignored)

    def launch_port(self, argv: Sequence[str]) -> int:
        """The port a launch command serves on: its ``--port`` (``--port N`` or ``--port=N``), else
        ``default_port``; what a scrape target's ``host:port`` is matched against."""
        for i, tok in enumerate(argv):
            value = tok.split("=", 1)[1] if tok.startswith("--port=") else (
                argv[i + 1] if tok == "--port" and i + 1 < len(argv) else None)
            if value is not None and value.isdigit() and 0 < int(value) < 65536:
                return int(value)
        return self.default_port

    def running_cap(self, plan: Plan) -> int | None:
        """The running-requests cap the launch fixes, when the server does not report one (None: unknown)."""
        return None

    def pool_scope(self, plan: Plan) -> str:
        """The scope of ``logged_kv_tokens`` summed over the replica, in words."""
        return "per replica"

    def levers(self, inputs: LeverInputs, skipped: list[str]) -> Iterator[LeverSpec]:
        """The levers diagnose prices for this launch, after ``current`` (what cannot be offered goes to
        ``skipped`` with the reason)."""
        return iter(())

    # ---- the human report ----
    def report_rows(self, plan: Plan) -> list[tuple[str, str, str]]:
        """The "Per rank" table of ``kvplan check``: (what, value with its unit, how it was obtained)."""
        r = plan.per_rank
        return [("weights", fmt_gib(r.weights_bytes), "per rank"),
                ("KV bytes per token", f"{r.kv_bytes_per_token:,} B", plan.settings.kv_cache_dtype),
                ("KV tokens", fmt_count_band(r.kv_tokens, *r.kv_tokens_range), "per rank"),
                ("KV pool", fmt_gib(r.kv_pool_bytes), "on the GPU"),
                ("max running requests", f"{r.max_running_requests:,}", "per rank")]

    # ---- host tiers ----
    def describe_host_tiers(self, plan: Plan) -> list[str]:
        """One phrase per host KV tier on a node: the user's number with its scope and unit, what is pinned, the node
        total (host-oversubscribed quotes them)."""
        return []

    def host_check_refuses(self, plan: Plan) -> str | None:
        """What the engine says when its own host check refuses the launch; None when nothing stops it."""
        return None

    def host_node_labels(self, plan: Plan) -> tuple[str, str]:
        """The "Per node" rows' names for the host tiers of all ranks and for ``per_node.host_reserve_bytes``."""
        return "host KV requested (all ranks)", "OS reserve (kept free by kvplan)"

    def host_ledger(self, plan: Plan) -> tuple[LedgerRow, ...]:
        """Every term this launch puts in one node's host memory, one row each with its scope, phases, source and
        range (kvplan.hostmem; ``kvplan.ledger.node_ledger`` adds the budget and the totals). The neutral default:
        each rank's own process (torch and the CUDA host side, ``hostmem.GPU_RANK_PROCESS``) and the host KV tiers
        the plan pins (``per_node.host_kv_bytes``, from start-up on)."""
        from kvplan import hostmem as hm

        n = plan.per_node
        rows = [hm.calibrated("rank-process", "rank process (torch, the CUDA host side)", "per rank", n.ranks,
                              hm.GPU_RANK_PROCESS)]
        if n.host_kv_bytes:
            rows.append(hm.row("host-kv", "host KV tiers", "per node", 1, n.host_kv_bytes, phases=(hm.STEADY,),
                               memory=hm.PINNED, source="per_node.host_kv_bytes"))
        return tuple(rows)

    # ---- kvplan plan: a launch from plain options ----
    def plan_argv(self, model: str, tp: int, dp: int, pp: int) -> list[str] | None:
        """The launch command of ``model`` on tp × dp × pp ranks (None: this engine has no such builder yet)."""
        return None

    def plan_settings(self) -> tuple[PlanSetting, ...]:
        """The settings ``kvplan plan --engine <name>`` takes as options, each one of the engine's launch flags."""
        return ()

    def plan_flags(self, values: Mapping[str, Any]) -> list[str]:
        """Launch flags for settings given as plain options (``{"mem_fraction_static": 0.9}``; None or False: not
        given). Integral numbers are written as integers: an engine's ``type=int`` flag refuses ``100.0``. A setting
        this engine has no flag for is a KvplanError naming the engine's own settings."""
        given = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in values.items()
                 if v is not None and v is not False}
        own = {s.key for s in self.plan_settings()}
        foreign = sorted(k for k in given if k not in own)
        if foreign:
            names = ", ".join("--" + k.replace("_", "-") for k in foreign)
            mine = ", ".join("--" + k.replace("_", "-") for k in sorted(own)) or "none"
            raise KvplanError(f"kvplan plan: {names} is not a {self.display_name} setting",
                              f"{self.display_name} takes {mine}; any other flag goes in a launch command for "
                              "kvplan check")
        return flags_from_values(given.items(), self.flag_table())

    def launch_model(self, cmd: LaunchCommand) -> str | None:
        """The model the launch names (its model flag or positional), as given; None when it names none."""
        return None

    # ---- the planning page (kvplan serve) ----
    def slider_flags(self, sliders: Mapping[str, Any]) -> dict[str, str | None]:
        """The page's sliders (``engines.results.SLIDER_NAMES``: fraction, host_kv, ...) as this engine's flags, in
        ``rewrite``'s language ("" sets a boolean, None removes); KvplanError for a slider it has no flag for."""
        if sliders:
            raise KvplanError(f"{self.display_name} has no flags for the page's sliders ({', '.join(sliders)})",
                              "put the flags in the launch command")
        return {}

    def slider_view(self, plan: Plan) -> SliderView:
        """What the page's sliders show for ``plan`` (values, labels naming the flags, the sliders that are off)."""
        from kvplan.engines.results import SLIDER_NAMES, SliderView

        return SliderView({}, {}, SLIDER_NAMES)

    # ---- the GPU at start-up ----
    def startup_free_bytes(self, gpu_total_bytes: int) -> int | None:
        """GPU memory free per rank when the engine checks its request at start-up, on a GPU of ``gpu_total_bytes``
        (nvidia-smi memory.total); None when the engine makes no such check."""
        return None

    # ---- findings ----
    def finding_rules(self) -> list[tuple[int, FindingRule]]:
        """This engine's own finding rules with their positions (rules of equal severity are reported in position
        order, generic rules included: see kvplan.findings.GENERIC)."""
        if not self.findings_package:
            return []
        pkg = importlib.import_module(self.findings_package)
        return [(pos, _rule(f"{self.findings_package}.{mod}")) for pos, mod in pkg.RULES]


def _rule(module: str) -> FindingRule:
    return cast(FindingRule, importlib.import_module(module))  # a module with ID and check() is a FindingRule
