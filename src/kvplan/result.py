"""The Plan: what a launch allocates per rank, per node and per replica, with units in the names.

Every engine produces the same Plan; findings, the report, explain, launch and diagnose all read it.
Bytes are ints; ``*_gib`` fields in the JSON are derived at the edge.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kvplan.units import GiB

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.hostmem import HostLedger

SCHEMA_VERSION = 1


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
class StaticPoolBudget:
    """GPU memory of one rank when the engine sizes a static pool (SGLang): ``mem_fraction_static`` of the free
    memory P it measures before loading weights holds the weights and the KV pool; the rest of P holds the
    req_to_token table, CUDA graphs and activations."""

    baseline_free_bytes: int  # P: free GPU memory the engine measures before loading weights
    mem_fraction_static: float
    headroom_bytes: int  # P × (1 − mem_fraction_static): outside the static pool
    req_to_token_bytes: int = 0
    cuda_graph_bytes: int = 0  # estimate
    headroom_after_pools_bytes: int = 0
    headroom_after_graphs_bytes: int = 0


@dataclass(frozen=True)
class UtilizationBudget:
    """GPU memory of one rank when the engine requests a share of the GPU (vLLM): ``ceil(total × utilization)``,
    of which the KV cache gets what the non-KV memory leaves. Nothing is sized outside that request."""

    requested_bytes: int | None  # None when the KV size is given exactly (no request, no profiling)


@dataclass(frozen=True)
class RankTerm:
    """A named term a launch feature adds to one rank (EPLB's redundant experts, PD's buffers, a speculative draft,
    LoRA buffers, ...): its bytes, the memory it is in, how it enters the plan (``counted``), how sure the figure is
    and the engine source it was read from. One type for every feature: ``per_rank.feature_terms`` in the JSON."""

    term: str  # id, e.g. "eplb-redundant-experts", "draft-weights"
    what: str
    bytes: int  # per rank
    memory: str  # "gpu" | "host"
    counted: str  # where the plan holds it: "in weights_bytes", "before the KV pool", "host ledger", ...
    source: str
    scope: str = "per rank"
    certainty: str = "exact"  # "exact" | "worst case" (an upper bound: e.g. adapters whose files were not read)

    @property
    def effect(self) -> str:
        return self.counted

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "gib": round(self.bytes / GiB, 3)}


def feature_term(term: str, bytes: int, scope: str, effect: str, source: str) -> RankTerm:
    """A speculative-draft or LoRA term (features.py, terms.py): ``scope`` "per rank" (GPU) or "per rank, host" (an
    upper bound held on the CPU)."""
    host = "host" in scope
    return RankTerm(term, term.replace("-", " "), bytes, "host" if host else "gpu", effect, source,
                    certainty="worst case" if host else "exact")


@dataclass(frozen=True)
class RankPlan:
    """One GPU rank (one scheduler / worker process)."""

    weights_bytes: int
    kv_bytes_per_token: int
    kv_tokens: int
    kv_pool_bytes: int  # what the KV buffers occupy on the GPU
    max_running_requests: int
    budget: StaticPoolBudget | UtilizationBudget  # how the engine decides the KV memory
    host_kv_tokens: int = 0
    host_kv_bytes: int = 0  # per rank, bytes of the host KV pool as sized by the engine
    host_kv_pinned_bytes: int = 0  # what the allocator actually pins (power-of-two rounding where it applies)
    swa_tokens: int | None = None
    mamba_slots: int | None = None
    kv_blocks: int | None = None
    kv_tokens_low: int | None = None  # the band: every estimated input at its worst / best end (None: exact)
    kv_tokens_high: int | None = None
    feature_terms: tuple[RankTerm, ...] = ()  # what launch features add: in the JSON only when present

    @property
    def kv_tokens_range(self) -> tuple[int, int]:
        """(low, high) KV tokens per rank: the value itself when every input is exact (a log's figures, a given KV
        size), else the plan at each estimated input's ends (engines/<engine>: baseline, weights, activation peak,
        non-torch, graphs)."""
        lo = self.kv_tokens if self.kv_tokens_low is None else self.kv_tokens_low
        hi = self.kv_tokens if self.kv_tokens_high is None else self.kv_tokens_high
        return min(lo, self.kv_tokens), max(hi, self.kv_tokens)

    @property
    def static(self) -> StaticPoolBudget | None:
        return self.budget if isinstance(self.budget, StaticPoolBudget) else None

    def to_dict(self) -> dict[str, Any]:
        """Schema v1: one flat record for every engine. An engine without a static pool (vLLM) reports its request
        under ``baseline_free_bytes`` (0 when the KV size is exact) and 0 for the static-pool headroom figures."""
        b = self.budget
        st = b if isinstance(b, StaticPoolBudget) else StaticPoolBudget(
            baseline_free_bytes=(b.requested_bytes or 0), mem_fraction_static=0.0, headroom_bytes=0)
        d: dict[str, Any] = {
            "weights_bytes": self.weights_bytes, "baseline_free_bytes": st.baseline_free_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token, "kv_tokens": self.kv_tokens,
            "kv_tokens_range": list(self.kv_tokens_range),
            "kv_pool_bytes": self.kv_pool_bytes, "headroom_bytes": st.headroom_bytes,
            "max_running_requests": self.max_running_requests, "req_to_token_bytes": st.req_to_token_bytes,
            "cuda_graph_bytes": st.cuda_graph_bytes, "headroom_after_pools_bytes": st.headroom_after_pools_bytes,
            "headroom_after_graphs_bytes": st.headroom_after_graphs_bytes,
            "mem_fraction_static": st.mem_fraction_static if self.static else None,
            "host_kv_tokens": self.host_kv_tokens, "host_kv_bytes": self.host_kv_bytes,
            "host_kv_pinned_bytes": self.host_kv_pinned_bytes, "swa_tokens": self.swa_tokens,
            "mamba_slots": self.mamba_slots, "kv_blocks": self.kv_blocks}
        d["weights_gib"] = round(self.weights_bytes / GiB, 3)
        d["kv_pool_gib"] = round(self.kv_pool_bytes / GiB, 3)
        d["headroom_gib"] = round(st.headroom_bytes / GiB, 3)
        d["baseline_free_gib"] = round(st.baseline_free_bytes / GiB, 3)
        d["headroom_after_graphs_gib"] = round(st.headroom_after_graphs_bytes / GiB, 3)
        if self.feature_terms:  # additive: plans without launch features keep the schema-v1 record as it was
            d["feature_terms"] = [t.to_dict() for t in self.feature_terms]
        return d


@dataclass(frozen=True)
class NodePlan:
    ranks: int  # GPU ranks of this launch on one node
    host_kv_bytes: int  # sum of the host KV pools of those ranks
    host_available_bytes: int | None  # host memory available on the node (see host_available_source); None: unknown
    host_available_source: str  # "--host-mem-gib", "this machine's MemAvailable (why)" or "not given (why)"
    host_reserve_bytes: int = 0  # what the engine keeps free for the OS (SGLang: 10 GiB)
    shm_bytes: int | None = None  # size of /dev/shm on the node (inside the container)
    # A container's limits (kvplan.deploy / --container-mem-gib, --gpus-requested); in the JSON only when known
    shm_source: str | None = None
    container_limit_bytes: int | None = None  # cgroup memory limit of the engine's container on this node
    container_limit_source: str | None = None
    gpus_requested: int | None = None  # GPUs the container / job is given on this node
    container_request_bytes: int | None = None  # the pod's memory request (the scheduler's reservation), this node
    container_request_source: str | None = None
    # This machine only (a plan whose host is read from its /proc/meminfo): MemTotal − MemAvailable, what other
    # processes and the kernel already hold on the node before the launch, and MemTotal; in the JSON only when known
    host_others_bytes: int | None = None
    host_total_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("shm_source", "container_limit_bytes", "container_limit_source", "gpus_requested",
                  "container_request_bytes", "container_request_source", "host_others_bytes", "host_total_bytes"):
            if d[k] is None:
                del d[k]
        d["host_kv_gb"] = round(self.host_kv_bytes / 1e9, 2)
        d["host_available_gib"] = None if self.host_available_bytes is None else round(
            self.host_available_bytes / GiB, 2)
        return d

    @property
    def host_known(self) -> bool:
        """Whether the node's host memory is known (given, or this machine's for a plan of this machine)."""
        return self.host_available_bytes is not None

    @property
    def host_usable_bytes(self) -> int | None:
        """What the host tiers may take on the node: available minus the engine's (or kvplan's) OS reserve."""
        return None if self.host_available_bytes is None else self.host_available_bytes - self.host_reserve_bytes


@dataclass(frozen=True)
class ReplicaPlan:
    ranks: int  # GPU ranks serving one copy of the model
    dp_groups: int  # independent KV pools inside the replica (DP attention groups)
    kv_tokens: int  # distinct tokens the replica can hold on GPU (summed over DP groups)
    avg_tokens: int  # tokens per request (prompt + output) the fit is computed for: min(--avg-tokens, context length)
    requests_fit: int  # requests of avg_tokens that fit at once (KV and max_running_requests)
    max_running_requests: int  # summed over DP groups
    replicas: int = 1  # replicas in this launch (plain --dp)
    max_concurrency: float | None = None  # vLLM's "Maximum concurrency" figure

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ModelSummary:
    """The facts a Plan reports about the model (models.spec.ModelSpec.summary)."""

    name: str
    architecture: str
    attention: str  # MHA / GQA / MQA / MLA, +SWA(n/N), +GDN(n/N) ...
    layers: int
    kv_heads: int
    head_dim: int
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None
    is_mla: bool
    is_moe: bool
    context_len: int
    weight_bytes: int | None  # the whole checkpoint
    source: str | None
    notes: tuple[str, ...] = ()  # what kvplan assumed about the model (catalog resolution, architecture fallback)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "notes": list(self.notes)}

    @classmethod
    def of(cls, spec: Any) -> ModelSummary:
        """The summary of a ModelSpec (``spec.summary()``), built once per spec object: specs are immutable and
        shared by every plan of their model (models.catalog, models.config)."""
        hit = _SUMMARIES.get(id(spec))
        if hit is None or hit[0] is not spec:
            if len(_SUMMARIES) >= 256:
                _SUMMARIES.clear()
            hit = _SUMMARIES[id(spec)] = (spec, cls(**spec.summary()))
        return hit[1]


_SUMMARIES: dict[int, tuple[Any, ModelSummary]] = {}  # id(spec) -> (spec, its summary); the spec stays alive


@dataclass(frozen=True)
class ClusterSummary:
    """The facts a Plan reports about the hardware (hardware.cluster.Cluster.summary)."""

    gpu: str
    gpu_mem_mib: int  # nvidia-smi memory.total of one GPU
    gpu_source: str
    gpus_per_node: int
    nodes: int
    host_mem_gib: float | None  # host memory available to the engine on one node; None: not given (other hardware)
    host_mem_source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HostFix:
    """How to size a host KV tier so the node keeps room: the advice and the flags of the fixed command."""

    text: str
    flags: dict[str, str | None]  # flag or env var -> new value (None removes it)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "flags": dict(self.flags)}


class EngineSettings(Protocol):
    """What every engine's resolved settings (SGLangSettings, VLLMSettings: frozen dataclasses in the engine
    packages) offer generic code; each engine adds its own typed fields."""

    @property
    def world_size(self) -> int: ...  # GPU ranks of one launch

    @property
    def context_len(self) -> int: ...  # tokens of one request at most

    @property
    def kv_cache_dtype(self) -> str: ...  # as the engine resolved it (label)

    @property
    def unknown_flags(self) -> tuple[str, ...]: ...  # kept as given, not modelled

    @property
    def unmodeled(self) -> tuple[str, ...]: ...  # features whose memory kvplan does not size

    @property
    def host_fix(self) -> HostFix | None: ...  # how to resize the largest host tier to fit the node

    def to_dict(self) -> dict[str, Any]: ...


def json_dict(obj: Any) -> dict[str, Any]:
    """A dataclass as JSON-ready dict, in field order: nested records through their own ``to_dict``, tuples as lists."""
    return {f.name: _jsonable(getattr(obj, f.name)) for f in fields(obj)}


def _jsonable(v: Any) -> Any:
    if hasattr(v, "to_dict"):
        return v.to_dict()
    if is_dataclass(v) and not isinstance(v, type):
        return json_dict(v)
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


@dataclass(frozen=True)
class Plan:
    engine: str
    engine_version: str
    version_source: str
    command: str
    model: ModelSummary
    cluster: ClusterSummary
    per_rank: RankPlan
    per_node: NodePlan
    per_replica: ReplicaPlan
    settings: EngineSettings  # resolved engine settings (mem fraction, page size, block size, host tiers, ...)
    assumptions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine, "engine_version": self.engine_version, "version_source": self.version_source,
            "command": self.command, "model": self.model.to_dict(), "cluster": self.cluster.to_dict(),
            "settings": self.settings.to_dict(), "per_rank": self.per_rank.to_dict(),
            "per_node": self.per_node.to_dict(), "per_replica": self.per_replica.to_dict(),
            "assumptions": list(self.assumptions),
        }


@dataclass(frozen=True)
class CheckResult:
    plan: Plan
    findings: tuple[Finding, ...]
    suggested_command: str | None = None
    suggested_plan: Plan | None = None
    suggested_findings: tuple[Finding, ...] = ()  # the suggested command, checked: never an error (kvplan.suggest)
    suggestion_note: str | None = None  # why no suggested command is shown although findings proposed fixes
    host_ledger: HostLedger | None = None  # every term of one node's host memory (kvplan.ledger.node_ledger)

    @property
    def verdict(self) -> str:
        sev = {f.severity for f in self.findings}
        return "fail" if "error" in sev else "warn" if "warning" in sev else "ok"

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "fail" else 0

    def to_dict(self) -> dict[str, Any]:
        d = {"schema_version": SCHEMA_VERSION, **self.plan.to_dict()}
        if self.host_ledger is not None:
            d["per_node"]["host_ledger"] = self.host_ledger.to_dict()
        d["findings"] = [f.to_dict() for f in self.findings]
        d["suggested_command"] = self.suggested_command
        if self.suggested_plan is not None:
            sp = self.suggested_plan
            d["suggested"] = {"per_rank": {"kv_tokens": sp.per_rank.kv_tokens,
                                           "host_kv_bytes": sp.per_rank.host_kv_bytes},
                              "per_node": {"host_kv_bytes": sp.per_node.host_kv_bytes},
                              "verdict": "warn" if any(f.severity == "warning" for f in self.suggested_findings)
                              else "ok",
                              "findings": [f"{f.id} ({f.severity})" for f in self.suggested_findings]}
        if self.suggestion_note:
            d["suggestion_note"] = self.suggestion_note
        d["verdict"] = self.verdict
        return d
