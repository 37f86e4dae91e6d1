"""Typed results of the engine hooks that explain, diagnose and launch call (kvplan.engines.base.Engine)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.logs.facts import LogFacts
    from kvplan.logs.serving import Sample


@dataclass(frozen=True)
class PlanSetting:
    """One option of ``kvplan plan`` that becomes a launch flag of an engine (``Engine.plan_settings``): the flag's
    key (``mem_fraction_static`` -> ``--mem-fraction-static``), its type (int, float, str, bool: a switch) and what
    it means, with its unit and scope."""

    key: str
    type: type
    help: str


@dataclass
class Comparison:
    """One figure a log printed next to the plan's (``kvplan explain``), with the tolerance the log's own rounding
    allows (its GiB figures have two decimals)."""

    field: str
    scope: str  # "per rank" | "per replica"
    observed: float | int | None
    predicted: float | int | None
    tolerance: float  # relative tolerance the log's own rounding allows
    note: str = ""

    @property
    def error_pct(self) -> float | None:
        if self.observed in (None, 0) or self.predicted is None:
            return None
        return (self.predicted - self.observed) / self.observed * 100

    @property
    def ok(self) -> bool | None:
        e = self.error_pct
        return None if e is None else abs(e) <= self.tolerance * 100

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "scope": self.scope, "observed": self.observed, "predicted": self.predicted,
                "error_pct": None if self.error_pct is None else round(self.error_pct, 4),
                "within_rounding": self.ok, "note": self.note}


class ServingDialect(Protocol):
    """An engine's serving-stats lines (engines/<engine>/serving.py): streams any size, never raises."""

    def sample(self, line: str) -> Sample | None: ...  # decode / prefill / stats / retract / preempt, else None

    def amend(self, line: str, last: Sample | None) -> bool: ...  # the line completes ``last`` (folded into it)

    def pool_tokens(self, samples: Sequence[Sample]) -> tuple[int, str] | None: ...  # (tokens per pool, how read)

    def corpus_record(self, s: Sample) -> dict[str, Any]: ...  # keys of ../shared/logcorpus/throughput.jsonl


class NoServing:
    """The dialect of an engine whose serving lines kvplan does not read (metrics only)."""

    @staticmethod
    def sample(line: str) -> Sample | None:
        return None

    @staticmethod
    def amend(line: str, last: Sample | None) -> bool:
        return False

    @staticmethod
    def pool_tokens(samples: Sequence[Sample]) -> tuple[int, str] | None:
        return None

    @staticmethod
    def corpus_record(s: Sample) -> dict[str, Any]:
        return {k: v for k, v in vars(s).items() if v is not None and k not in ("kind", "fmt", "raw")}


class StartupDialect(Protocol):
    """An engine's startup-log parser (engines/<engine>/log.py): streams any size, never raises."""

    def looks_like(self, line: str) -> bool: ...  # a line only this engine prints

    def parse(self, lines: Iterable[str]) -> LogFacts: ...


@dataclass(frozen=True)
class MetricNames:
    """An engine's Prometheus ``/metrics`` names, by what they mean (the first name present wins; label sets, i.e.
    DP ranks or engines, add up; an empty tuple: the engine has no such metric)."""

    prefix: str  # every name of this engine starts with it ("vllm:"): a page with it is this engine's
    running: tuple[str, ...]  # gauge: requests running
    waiting: tuple[str, ...]  # gauge: requests waiting
    usage: tuple[str, ...]  # gauge: KV pool usage 0-1 (the peak over label sets)
    generation_tokens: tuple[str, ...]  # counter
    prompt_tokens: tuple[str, ...]  # counter
    used_tokens: tuple[str, ...] = ()  # gauge: KV tokens in use
    host_used_tokens: tuple[str, ...] = ()  # gauge: host KV tier tokens in use
    host_total_tokens: tuple[str, ...] = ()  # gauge: host KV tier capacity
    accept_length: tuple[str, ...] = ()  # gauge: speculative decoding acceptance length (peak)
    gen_throughput: tuple[str, ...] = ()  # gauge: generation tok/s of the last logging interval
    preemptions: tuple[str, ...] = ()  # counter
    prefix_queries: tuple[str, ...] = ()  # counter: prompt tokens looked up in the prefix cache
    prefix_hits: tuple[str, ...] = ()  # counter: of those, found
    external_queries: tuple[str, ...] = ()  # counter: KV connector (LMCache, offloading) lookups
    external_hits: tuple[str, ...] = ()
    cached_tokens: tuple[str, ...] = ()  # counter: prompt tokens served from the prefix cache
    retracted: tuple[str, ...] = ()  # gauge: requests retracted
    requests: tuple[str, ...] = ()  # counter: requests finished (with prompt/generation totals: average length)
    pool_tokens: tuple[str, ...] = ()  # gauge set at start: KV tokens of one pool (one DP group): the peak
    config_info: str | None = None  # info metric whose labels are the cache config (vLLM cache_config_info)
    model_label: str = "model_name"  # the label every load series carries naming the served model

    def histogram(self, what: str) -> str:
        """``<prefix>request_<what>_tokens``: the per-request histograms (``_count``, ``_sum``)."""
        return f"{self.prefix}request_{what}_tokens"


# The sliders of the planning page (kvplan serve), by what they mean; an engine maps each to its own flags.
SLIDER_NAMES = ("fraction", "host_kv", "hicache_ratio", "tp", "dp", "max_running", "fp8_kv", "dp_attention")


@dataclass(frozen=True)
class SliderView:
    """What the planning page's sliders show for a plan (``Engine.slider_view``): the plan's value of each slider the
    engine has, labels naming the engine's flags, and the sliders it has no flag for (shown disabled)."""

    values: dict[str, float | int | bool]
    labels: dict[str, str]
    off: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"values": dict(self.values), "labels": dict(self.labels), "off": list(self.off)}
