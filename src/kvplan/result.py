"""The Plan: what a launch allocates per rank, per node and per replica, with units in the names.

Every engine produces the same Plan; findings, the report, explain, launch and diagnose all read it.
Bytes are ints; ``*_gib`` fields in the JSON are derived at the edge.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvplan.units import GiB

SCHEMA_VERSION = 1
SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str  # error | warning | info
    message: str  # says the scope (per rank / per node / per replica) of each number
    fix: str
    flags: dict[str, str | None] = field(default_factory=dict)  # flag -> new value (None removes it)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "message": self.message, "fix": self.fix}


@dataclass(frozen=True)
class RankPlan:
    """One GPU rank (one scheduler / worker process)."""

    weights_bytes: int
    baseline_free_bytes: int  # free GPU memory the engine measures before loading weights
    kv_bytes_per_token: int
    kv_tokens: int
    kv_pool_bytes: int  # what the KV buffers occupy on the GPU
    headroom_bytes: int  # memory left outside the static pool (weights + KV)
    max_running_requests: int
    req_to_token_bytes: int = 0
    cuda_graph_bytes: int = 0  # estimate
    headroom_after_pools_bytes: int = 0
    headroom_after_graphs_bytes: int = 0
    mem_fraction_static: float | None = None
    host_kv_tokens: int = 0
    host_kv_bytes: int = 0  # per rank, bytes of the host KV pool as sized by the engine
    host_kv_pinned_bytes: int = 0  # what the allocator actually pins (power-of-two rounding where it applies)
    swa_tokens: int | None = None
    mamba_slots: int | None = None
    kv_blocks: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["weights_gib"] = round(self.weights_bytes / GiB, 3)
        d["kv_pool_gib"] = round(self.kv_pool_bytes / GiB, 3)
        d["headroom_gib"] = round(self.headroom_bytes / GiB, 3)
        d["baseline_free_gib"] = round(self.baseline_free_bytes / GiB, 3)
        d["headroom_after_graphs_gib"] = round(self.headroom_after_graphs_bytes / GiB, 3)
        return d


@dataclass(frozen=True)
class NodePlan:
    ranks: int  # GPU ranks of this launch on one node
    host_kv_bytes: int  # sum of the host KV pools of those ranks
    host_available_bytes: int  # host memory available on the node (see host_available_source)
    host_available_source: str
    host_reserve_bytes: int = 0  # what the engine keeps free for the OS (SGLang: 10 GiB)
    shm_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["host_kv_gb"] = round(self.host_kv_bytes / 1e9, 2)
        d["host_available_gib"] = round(self.host_available_bytes / GiB, 2)
        return d


@dataclass(frozen=True)
class ReplicaPlan:
    ranks: int  # GPU ranks serving one copy of the model
    dp_groups: int  # independent KV pools inside the replica (DP attention groups)
    kv_tokens: int  # distinct tokens the replica can hold on GPU (summed over DP groups)
    avg_tokens: int  # tokens per request (prompt + output) the fit is computed for
    requests_fit: int  # requests of avg_tokens that fit at once (KV and max_running_requests)
    max_running_requests: int  # summed over DP groups
    replicas: int = 1  # replicas in this launch (plain --dp)
    max_concurrency: float | None = None  # vLLM's "Maximum concurrency" figure

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Plan:
    engine: str
    engine_version: str
    version_source: str
    command: str
    model: dict[str, Any]
    cluster: dict[str, Any]
    per_rank: RankPlan
    per_node: NodePlan
    per_replica: ReplicaPlan
    settings: dict[str, Any]  # resolved engine settings (mem fraction, page size, ...)
    assumptions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine, "engine_version": self.engine_version, "version_source": self.version_source,
            "command": self.command, "model": self.model, "cluster": self.cluster, "settings": self.settings,
            "per_rank": self.per_rank.to_dict(), "per_node": self.per_node.to_dict(),
            "per_replica": self.per_replica.to_dict(), "assumptions": list(self.assumptions),
        }


@dataclass(frozen=True)
class CheckResult:
    plan: Plan
    findings: tuple[Finding, ...]
    suggested_command: str | None = None
    suggested_plan: Plan | None = None

    @property
    def verdict(self) -> str:
        sev = {f.severity for f in self.findings}
        return "fail" if "error" in sev else "warn" if "warning" in sev else "ok"

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "fail" else 0

    def to_dict(self) -> dict[str, Any]:
        d = {"schema_version": SCHEMA_VERSION, **self.plan.to_dict()}
        d["findings"] = [f.to_dict() for f in self.findings]
        d["suggested_command"] = self.suggested_command
        if self.suggested_plan is not None:
            sp = self.suggested_plan
            d["suggested"] = {"per_rank": {"kv_tokens": sp.per_rank.kv_tokens,
                                           "host_kv_bytes": sp.per_rank.host_kv_bytes},
                              "per_node": {"host_kv_bytes": sp.per_node.host_kv_bytes}}
        d["verdict"] = self.verdict
        return d
