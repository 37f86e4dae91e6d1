"""The engine series a Prometheus server holds over the window (``/api/v1/series``), grouped per replica.

A replica is one scrape target (its ``job``, ``namespace``, ``pod``, ``instance`` labels: ``query.REPLICA_LABELS``);
its engine is the one whose metric-name prefix its series carry (``MetricNames.prefix``), its model the engine's
model label (``MetricNames.model_label``), its launch facts the labels of the engine's config-info metric (vLLM
``cache_config_info``). Replicas group into deployments by ``job`` and model. A target with no running gauge is no
replica (an exporter of something else under the same prefix). Bounded: at most ``MAX_SERIES`` series are read
and ``MAX_REPLICAS`` replicas kept (a note says what was left out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.diagnose.fleet.query import REPLICA_LABELS, Names

MAX_SERIES = 100_000
MAX_REPLICAS = 2000
MAX_MODELS = 4
Key = tuple[str, ...]


@dataclass
class Replica:
    key: Key  # the REPLICA_LABELS values ("" when absent)
    names: set[str] = field(default_factory=set)  # metric names it has
    engines: dict[str, int] = field(default_factory=dict)  # registry name -> series with its prefix
    models: list[str] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)  # the config-info metric's labels
    series: int = 0

    @property
    def labels(self) -> dict[str, str]:
        return {k: v for k, v in zip(REPLICA_LABELS, self.key, strict=True) if v}

    @property
    def instance(self) -> str:
        lab = self.labels
        return lab.get("instance") or lab.get("pod") or "?"

    @property
    def engine(self) -> str | None:
        return max(self.engines, key=lambda e: self.engines[e]) if self.engines else None

    @property
    def model(self) -> str | None:
        return self.models[0] if self.models else None


@dataclass
class Discovery:
    names: Names
    replicas: dict[Key, Replica] = field(default_factory=dict)
    series: int = 0
    ignored: int = 0
    notes: list[str] = field(default_factory=list)

    def feed(self, el: Any) -> None:
        """One element of the series answer: a label set (str -> str)."""
        if not isinstance(el, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in el.items()):
            self.ignored += 1
            return
        name = el.get("__name__", "")
        prefix = name.split(":", 1)[0] + ":" if ":" in name else ""
        engine = self.names.engine_of_prefix.get(prefix)
        if engine is None or self.series >= MAX_SERIES:
            self.ignored += engine is None
            return
        self.series += 1
        key = tuple(el.get(k, "")[:256] for k in REPLICA_LABELS)
        rep = self.replicas.get(key)
        if rep is None:
            rep = self.replicas[key] = Replica(key)
        rep.series += 1
        rep.names.add(name)
        rep.engines[engine] = rep.engines.get(engine, 0) + 1
        table = self.names.tables[engine]
        model = el.get(table.model_label)
        if model and model not in rep.models and len(rep.models) < MAX_MODELS:
            rep.models.append(model[:512])
        if name == table.config_info and not rep.config:
            rep.config = {k: v[:256] for k, v in list(el.items())[:64] if k != "__name__" and k not in REPLICA_LABELS}

    def done(self) -> list[Replica]:
        """The replicas (targets with a running gauge), in label order, at most MAX_REPLICAS."""
        if self.series >= MAX_SERIES:
            self.notes.append(f"more than {MAX_SERIES:,} engine series: the rest were not read (narrow with --match)")
        running = set(self.names.running)
        reps = sorted((r for r in self.replicas.values() if r.names & running), key=lambda r: r.key)
        if len(reps) > MAX_REPLICAS:
            self.notes.append(f"{len(reps):,} replicas: the first {MAX_REPLICAS:,} by label are diagnosed (narrow "
                              "with --match)")
            reps = reps[:MAX_REPLICAS]
        for r in reps:
            if len(r.engines) > 1:
                self.notes.append(f"{r.instance}: series of {' and '.join(sorted(r.engines))}: read as {r.engine}")
        return reps
