"""``kvplan explain LOG``: where each GiB went, log vs plan, rank by rank.

1. Detect the engine from the log's own lines, parse it into LogFacts (``logs/``).
2. Rebuild the launch: the flags the log shows (ServerArgs dump, non-default args, engine config line), then
   the user's ``-- COMMAND`` for what the log does not show.
3. Plan it with the same engine model as ``kvplan check``, feeding in the figures the log measured that no
   planner can know in advance (free memory before weights and weights for SGLang; KV memory per worker for
   vLLM). A figure the log lacks is estimated, and the report says which and how uncertain.
4. Compare every figure both sides have; flag differences beyond the log's own rounding with a likely cause.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Any

from kvplan.errors import KvplanError
from kvplan.logs.facts import LogFacts

SNIFF_LINES = 5000

# SGLang ServerArgs fields that are flags of the same name; vLLM config-line synonyms.
VLLM_SYNONYMS = {"max_seq_len": "max_model_len", "model_path": "model"}


@dataclass
class Comparison:
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


@dataclass
class ExplainResult:
    facts: LogFacts
    engine: str
    engine_version: str
    version_source: str
    command: str
    check: Any | None  # CheckResult of the rebuilt launch (None when it cannot be planned)
    comparisons: list[Comparison] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # figures the log lacks, with what was assumed
    unsupported: str | None = None  # why no prediction could be made

    @property
    def exit_code(self) -> int:
        return self.check.exit_code if self.check is not None else 0

    def observed(self) -> dict[str, Any]:
        f, r = self.facts, self.facts.first_rank()
        out: dict[str, Any] = {"kv_tokens": f.kv_tokens if f.kv_tokens is not None else (r.kv_tokens if r else None)}
        if out["kv_tokens"] is None and f.gpu_blocks and self.check is not None:  # V0 prints blocks, not tokens
            out["kv_tokens"] = f.gpu_blocks * self.check.plan.settings.get("block_size", 16)
        if self.engine == "vllm":
            out.update(kv_blocks=f.gpu_blocks, max_concurrency=f.max_concurrency, concurrency_len=f.concurrency_len)
        if r is not None:
            for k, v in vars(r).items():
                if v is not None and k != "kv_tokens":
                    out[k] = v
        out["errors"] = list(f.errors)
        return out

    def to_dict(self) -> dict[str, Any]:
        pred: dict[str, Any] = {}
        if self.check is not None:
            p = self.check.plan
            pred = {"kv_tokens": p.per_rank.kv_tokens if self.engine == "sglang" else p.per_replica.kv_tokens,
                    "kv_bytes_per_token": p.per_rank.kv_bytes_per_token,
                    "weights_gib": round(p.per_rank.weights_bytes / 2**30, 3),
                    "kv_pool_gib": round(p.per_rank.kv_pool_bytes / 2**30, 3)}
            if self.engine == "vllm":
                pred.update(kv_blocks=p.per_rank.kv_blocks, max_concurrency=p.per_replica.max_concurrency)
            else:
                pred.update(headroom_after_pools_gib=round(p.per_rank.headroom_after_pools_bytes / 2**30, 3),
                            headroom_after_graphs_gib=round(p.per_rank.headroom_after_graphs_bytes / 2**30, 3))
            if p.per_rank.host_kv_bytes:
                pred["host_kv_bytes"] = p.per_rank.host_kv_bytes
        return {"engine": self.engine, "engine_version": self.engine_version, "version_source": self.version_source,
                "command": self.command, "observed": self.observed(), "predicted": pred,
                "comparisons": [c.to_dict() for c in self.comparisons], "missing": self.missing,
                "unsupported": self.unsupported,
                "findings": [f.to_dict() for f in self.check.findings] if self.check else [],
                "lines_read": self.facts.lines_read, "lines_matched": self.facts.lines_matched,
                "plan": self.check.to_dict() if self.check else None}  # the rebuilt launch, as check --json


def _detect(lines: Iterator[str]) -> tuple[str, list[str]]:
    from kvplan.logs import sglang, vllm

    head = list(islice(lines, SNIFF_LINES))
    votes = {"sglang": sum(1 for ln in head if sglang.looks_like(ln)),
             "vllm": sum(1 for ln in head if vllm.looks_like(ln))}
    engine = max(votes, key=votes.get)
    if votes[engine] == 0:
        raise KvplanError("no SGLang or vLLM startup line in this log",
                          "pass the engine's own log (stdout/stderr of the launch)")
    return engine, head


def parse_log(path: str) -> LogFacts:
    """Detect the engine and parse the whole log (streamed)."""
    from kvplan.logs import sglang, vllm
    from kvplan.logs.reader import iter_lines

    lines = iter_lines(path)
    engine, head = _detect(lines)
    parser = sglang if engine == "sglang" else vllm
    return parser.parse(chain(head, lines))


def _flag_tokens(engine: str, args: dict[str, Any]) -> list[str]:
    """Launch flags for the args a log showed (only flags kvplan's engine model knows)."""
    if engine == "sglang":
        from kvplan.engines.sglang.args import FLAGS
        from kvplan.engines.sglang.args import SGLangArgs as Args
    else:
        from kvplan.engines.vllm.args import FLAGS
        from kvplan.engines.vllm.args import VLLMArgs as Args
    known = {f.key: f for f in FLAGS}
    relevant = set(Args.__dataclass_fields__) - {"model", "model_path", "env", "unknown_flags", "unmodeled",
                                                 "flags_given", "kv_transfer_config"}
    out: list[str] = []
    args = dict(args)
    if engine == "vllm" and str(args.get("device_config", "")).lower() == "cpu":
        args["device"] = "cpu"  # the engine config line says where it ran
    if engine == "sglang" and args.get("enable_hierarchical_cache") is not True:
        args = {k: v for k, v in args.items() if not k.startswith("hicache_")}  # inert without HiCache
    for key, val in args.items():
        key = VLLM_SYNONYMS.get(key, key) if engine == "vllm" else key
        f = known.get(key)
        if f is None or val is None or key not in relevant or (isinstance(val, str) and val[:1] in "{[<"):
            continue
        if f.kind == "bool":
            if val is True:
                out.append(f.name)
        elif not isinstance(val, (dict, list)):
            out += [f.name, str(val)]
    return out


def rebuild_command(facts: LogFacts, user_command: Sequence[str] | None, model_config: str | None = None) -> list[str]:
    """The launch as the log shows it; the user's command fills in what the log does not show."""
    from kvplan.engines import split_command

    log_flags = _flag_tokens(facts.engine or "sglang", facts.args)
    model = facts.args.get("model_path") or facts.args.get("model") or facts.model or model_config
    if user_command:
        cmd = split_command(list(user_command))
        if model and not any(t in cmd.argv for t in ("--model", "--model-path")) and cmd.program[-1] != "serve":
            log_flags = ["--model-path" if facts.engine == "sglang" else "--model", str(model), *log_flags]
        return [*cmd.argv, *log_flags]  # later flags win in argparse: the log's values take precedence
    if not model:
        raise KvplanError("the log does not name the model",
                          "add the launch command after --, or pass --model-config")
    if facts.engine == "vllm":
        return ["vllm", "serve", str(model), *log_flags]
    return ["python", "-m", "sglang.launch_server", "--model-path", str(model), *log_flags]


def explain(path: str, command: Sequence[str] | None = None, **options: Any) -> ExplainResult:
    from kvplan import api
    from kvplan.explain_compare import compare

    facts = parse_log(path)
    argv = rebuild_command(facts, command, options.get("model_config"))
    opts = dict(options)
    version, vsrc = _version(facts, opts.pop("engine_version", None))
    missing: list[str] = []
    opts.update(observed_inputs(facts, missing))
    if facts.engine == "sglang" and "mem_fraction_static" not in facts.args and vsrc.startswith("not printed") and not (
            command and any(str(t).startswith("--mem-fraction-static") for t in command)):
        missing.append(f"mem_fraction_static (no ServerArgs dump, version unknown): SGLang {version}'s default for "
                       "this GPU was used; pass --engine-version or the launch command after --")
    try:
        result = api.check(argv, engine_version=version, **{k: v for k, v in opts.items() if v is not None})
    except KvplanError as e:
        return ExplainResult(facts, facts.engine or "?", version, vsrc, " ".join(argv), None, [], missing, str(e))
    res = ExplainResult(facts, facts.engine or "?", version, vsrc, result.plan.command, result, [], missing)
    res.comparisons = compare(facts, result.plan)
    return res


def _version(facts: LogFacts, given: str | None) -> tuple[str, str]:
    if given:
        return given, "--engine-version"
    if facts.version:
        return facts.version, "printed in the log"
    if facts.engine == "vllm":
        from kvplan.engines.vllm.rules import NEWEST
    else:
        from kvplan.engines.sglang.rules import NEWEST
    guess = _version_from_hint(facts.version_hint or "") or NEWEST
    hint = f" (formats: {facts.version_hint})" if facts.version_hint else ""
    return guess, f"not printed in the log{hint}; assumed {guess}, pass --engine-version"


def _version_from_hint(hint: str) -> str | None:
    """The newest version every format marker allows: the lowest '<=X' or range end, not below any 'X+'."""
    import re

    from kvplan.engines.versions import Version

    v = r"(\d+\.\d+(?:\.\d+)?)"
    uppers = re.findall(r"<=\s*" + v, hint) + re.findall(v + r"\s*[–-]\s*" + v, hint)
    uppers = [u[1] if isinstance(u, tuple) else u for u in uppers]
    lowers = re.findall(v + r"\+", hint) + [u[0] for u in re.findall(v + r"\s*[–-]\s*" + v, hint)]
    try:
        top = min((Version(u) for u in uppers), default=None)
        low = max((Version(x) for x in lowers), default=None)
    except KvplanError:
        return None
    if top is not None and (low is None or low <= top):
        return top.text
    return low.text if low is not None else None


def observed_inputs(facts: LogFacts, missing: list[str]) -> dict[str, Any]:
    """Plan options taken from what the log measured (the figures no planner can know in advance)."""
    ranks = list(facts.ranks.values())
    if facts.engine == "sglang":
        frees = [r.load_begin_avail_gib for r in ranks if r.load_begin_avail_gib is not None]
        # weights = free before loading - free after it (what SGLang's formula subtracts); else "mem usage="
        weights = [r.load_begin_avail_gib - r.load_end_avail_gib for r in ranks
                   if r.load_begin_avail_gib is not None and r.load_end_avail_gib is not None]
        weights = weights or [r.weights_gib for r in ranks if r.weights_gib is not None]
        if not frees:  # P = free after loading + what loading took
            frees = [r.load_end_avail_gib + r.weights_gib for r in ranks
                     if r.load_end_avail_gib is not None and r.weights_gib is not None]
        out: dict[str, Any] = {}
        if frees:
            out["free_gib"] = min(frees)  # SGLang takes the MIN over ranks
        else:
            missing.append("free GPU memory before weights ('Load weight begin. avail mem='): estimated from the "
                           "GPU total minus the CUDA context, ±1 GiB per rank")
        if weights:
            out["weights_gib"] = max(weights)
        else:
            missing.append("weights per rank ('Load weight end ... mem usage='): estimated from the checkpoint size")
        return out
    avail = [r.available_kv_gib for r in ranks if r.available_kv_gib is not None]
    if facts.args.get("kv_cache_memory_bytes"):
        return {}  # the launch gave the exact size; the log's figure is the same number rounded to 0.01 GiB
    if avail:
        # the minimum worker sets the block count (rounded to 0.01 GiB); a negative figure means no KV at all
        return {"kv_memory_gib": max(0.0, min(avail))}
    missing.append("KV memory per worker ('Available KV cache memory'): estimated from gpu_memory_utilization minus "
                   "weights, activation peak and CUDA graphs, ±1-2 GiB per rank")
    return {}


def iter_explain(paths: Iterable[str], **options: Any) -> Iterator[ExplainResult]:  # pragma: no cover - helper
    for p in paths:
        yield explain(p, **options)


_observed_inputs = observed_inputs  # older name
