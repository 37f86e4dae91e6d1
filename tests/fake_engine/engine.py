"""toyllm's Engine: flags, plan, log dialects, levers (see the package docstring)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvplan.engines.base import Engine
from kvplan.engines.cmdline import Flag, LaunchCommand, parse_flags
from kvplan.engines.levers import LeverInputs, LeverSpec
from kvplan.errors import KvplanError
from kvplan.logs.facts import LogFacts
from kvplan.logs.serving import Sample
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
    json_dict,
)
from kvplan.units import GiB

FLAGS = (Flag("--model"), Flag("--kv-gib", "float"), Flag("--block-size", "int"), Flag("--max-seqs", "int"),
         Flag("--tp", "int"), Flag("--port", "int"), Flag("--host"))


@dataclass(frozen=True)
class ToyArgs:
    model: str | None = None
    kv_gib: float = 1.0
    block_size: int = 16
    max_seqs: int = 64
    tp: int = 1
    unknown_flags: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        return self.tp


@dataclass(frozen=True)
class ToySettings:
    kv_gib: float
    block_size: int
    context_len: int
    kv_cache_dtype: str
    world_size: int
    unknown_flags: tuple[str, ...]
    unmodeled: tuple[str, ...] = ()
    host_fix: HostFix | None = None

    def to_dict(self) -> dict[str, Any]:
        return json_dict(self)


class ToyLog:
    """Startup lines -> LogFacts."""

    VERSION, ARGS, POOL = re.compile(r"toyllm (\d+\.\d+\.\d+) starting"), re.compile(r"toyllm args: (.*)"), \
        re.compile(r"toyllm kv pool: (\d+) tokens")

    def looks_like(self, line: str) -> bool:
        return line.startswith("toyllm ")

    def parse(self, lines: Iterable[str]) -> LogFacts:
        f = LogFacts(engine="toyllm")
        for line in lines:
            f.lines_read += 1
            if m := self.VERSION.search(line):
                f.version = m.group(1)
            elif m := self.ARGS.search(line):
                for item in m.group(1).split():
                    key, _, value = item.partition("=")
                    f.args[key] = value
                f.model = f.args.get("model")
            elif m := self.POOL.search(line):
                f.kv_tokens = int(m.group(1))
            else:
                continue
            f.lines_matched += 1
        return f


class ToyServing:
    """"toyllm stats: running=R waiting=W usage=U gen_tps=T" -> Sample."""

    STATS = re.compile(r"toyllm stats: running=(\d+) waiting=(\d+) usage=([\d.]+) gen_tps=([\d.]+)")

    def sample(self, line: str) -> Sample | None:
        m = self.STATS.search(line)
        if m is None:
            return None
        return Sample(kind="stats", fmt="toyllm", running=int(m.group(1)), queued=int(m.group(2)),
                      usage=float(m.group(3)), gen_tps=float(m.group(4)))

    def amend(self, line: str, last: Sample | None) -> bool:
        return False

    def pool_tokens(self, samples: Sequence[Sample]) -> tuple[int, str] | None:
        return None

    def corpus_record(self, s: Sample) -> dict[str, Any]:
        return {"running": s.running, "waiting": s.queued, "usage": s.usage, "gen_tps": s.gen_tps}


class ToyEngine(Engine):
    name = "toyllm"
    display_name = "toyllm"
    cli = "toyllm"
    launch_hint = "`toyllm serve MODEL ...`"
    findings_package = "tests.fake_engine.findings"
    newest_version = "1.2.0"
    launch_markers = ("toyllm args:",)
    default_port = 9000

    def parse(self, cmd: LaunchCommand) -> ToyArgs:
        p = parse_flags(cmd.args, FLAGS)
        v = {k: val for k, val in p.values.items() if k in ToyArgs.__dataclass_fields__}
        if p.positionals and "model" not in v:
            v["model"] = p.positionals[0]
        if v.get("kv_gib", 1.0) <= 0:
            raise KvplanError("--kv-gib must be > 0", "fix it in the launch command")
        return ToyArgs(**v, unknown_flags=tuple(p.unknown))

    def flag_table(self) -> tuple[Flag, ...]:
        return FLAGS

    def plan(self, cmd: LaunchCommand, options: PlanOptions, args: Any = None) -> Plan:
        """tokens per rank = floor(kv_gib × 2^30 / cell) rounded down to whole blocks; cell = 2 (K and V) × KV heads
        per rank × head_dim × layers × 2 B (bf16)."""
        from kvplan.hardware.cluster import resolve_cluster
        from kvplan.models.catalog import resolve_model

        a: ToyArgs = args or self.parse(cmd)
        model = resolve_model(a.model, options.model_config)
        cluster = resolve_cluster(options.gpu, options.gpu_mem_mib, options.gpus_per_node, options.nodes,
                                  options.host_mem_gib, world_size=a.world_size)
        cell = 2 * max(1, model.num_kv_heads // a.tp) * model.head_dim * model.num_layers * 2
        tokens = int(a.kv_gib * GiB) // cell // a.block_size * a.block_size
        rank = RankPlan(weights_bytes=0, kv_bytes_per_token=cell, kv_tokens=tokens, kv_pool_bytes=tokens * cell,
                        max_running_requests=a.max_seqs, budget=UtilizationBudget(None),
                        kv_blocks=tokens // a.block_size)
        node = NodePlan(ranks=a.tp, host_kv_bytes=0, host_available_bytes=cluster.host_mem_bytes,
                        host_available_source=cluster.host_mem_source)
        fit = min(tokens // options.avg_tokens, a.max_seqs)
        replica = ReplicaPlan(ranks=a.tp, dp_groups=1, kv_tokens=tokens, avg_tokens=options.avg_tokens,
                              requests_fit=fit, max_running_requests=a.max_seqs)
        settings = ToySettings(a.kv_gib, a.block_size, model.context_len, "bfloat16", a.world_size, a.unknown_flags)
        return Plan(self.name, options.engine_version or self.newest_version, "--engine-version or newest",
                    cmd.text(), ModelSummary(**model.summary()), ClusterSummary(**cluster.summary()), rank, node,
                    replica, settings, (f"KV pool exactly --kv-gib {a.kv_gib:g} GiB per rank",))

    def log_dialect(self) -> ToyLog:
        return ToyLog()

    def serving_dialect(self) -> ToyServing:
        return ToyServing()

    def launch_argv(self, model: str, flags: Sequence[str]) -> list[str]:
        return ["toyllm", "serve", model, *flags]

    def log_flags(self, args: Mapping[str, Any]) -> list[str]:
        return super().log_flags({k: v for k, v in args.items() if k != "model"})

    def running_cap(self, plan: Plan) -> int | None:
        return plan.per_replica.max_running_requests

    def levers(self, inputs: LeverInputs, skipped: list[str]) -> Iterator[LeverSpec]:
        s = inputs.current.settings
        assert isinstance(s, ToySettings)
        yield LeverSpec("KV ×2", {"--kv-gib": f"{s.kv_gib * 2:g}"}, ["twice the KV memory per rank"])


ENGINE = ToyEngine()
