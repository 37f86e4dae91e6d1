"""``kvplan explain LOG``: where each GiB went, log vs plan, rank by rank.

1. Detect the engine from the log's own lines (each engine's ``looks_like``), parse it into LogFacts.
2. Rebuild the launch: the flags the log shows (ServerArgs dump, non-default args, engine config line), then
   the user's ``-- COMMAND`` for what the log does not show.
3. Plan it with the same engine model as ``kvplan check``, feeding in the figures the log measured that no
   planner can know in advance (``Engine.observed_inputs``: free memory before weights and weights for SGLang;
   KV memory per worker for vLLM). A figure the log lacks is estimated, and the report says which and how
   uncertain.
4. Compare every figure both sides have (``Engine.compare``); flag differences beyond the log's own rounding with a
   likely cause.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from kvplan.engines.cmdline import tokenize
from kvplan.engines.results import Comparison
from kvplan.errors import KvplanError
from kvplan.logs.facts import LogFacts

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.base import Engine
    from kvplan.engines.loggpu import LogGpu
    from kvplan.result import CheckResult, Finding, Plan

__all__ = ["Comparison", "ExplainResult", "explain", "observed_inputs", "parse_log", "rebuild_command"]
SNIFF_LINES = 5000
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")  # a NAME=value environment token (kvplan.engines.cmdline's rule)


def _engine(facts: LogFacts) -> Engine:
    from kvplan.engines import DEFAULT_ENGINE, get_engine

    return get_engine(facts.engine or DEFAULT_ENGINE)


@dataclass
class ExplainResult:
    facts: LogFacts
    engine: str
    engine_version: str
    version_source: str
    command: str
    check: CheckResult | None  # the rebuilt launch, planned (None when it cannot be planned)
    comparisons: list[Comparison] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # figures the log lacks, with what was assumed
    unsupported: str | None = None  # why no prediction could be made
    log_gpu: LogGpu | None = None  # the GPU taken from the log's own figures (no --gpu given)

    @property
    def exit_code(self) -> int:
        """2 when nothing could be planned (``unsupported`` says why), else 0: the launch already happened, its
        findings are reported, not a refusal."""
        return 2 if self.check is None else 0

    def observed(self) -> dict[str, Any]:
        f, r, eng = self.facts, self.facts.first_rank(), _engine(self.facts)
        out: dict[str, Any] = {"kv_tokens": eng.observed_kv_tokens(f, self.check.plan if self.check else None)}
        out.update(eng.observed_extra(f))
        if r is not None:
            for k, v in vars(r).items():
                if v is not None and k != "kv_tokens":
                    out[k] = v
        out["errors"] = list(f.errors)
        return out

    def to_dict(self) -> dict[str, Any]:
        pred: dict[str, Any] = {}
        if self.check is not None:
            p, eng = self.check.plan, _engine(self.facts)
            pred = {"kv_tokens": eng.logged_kv_tokens(p), "kv_bytes_per_token": p.per_rank.kv_bytes_per_token,
                    "weights_gib": round(p.per_rank.weights_bytes / 2**30, 3),
                    "kv_pool_gib": round(p.per_rank.kv_pool_bytes / 2**30, 3)}
            pred.update(eng.predicted_extra(p))
            if p.per_rank.host_kv_bytes:
                pred["host_kv_bytes"] = p.per_rank.host_kv_bytes
        return {"engine": self.engine, "engine_version": self.engine_version, "version_source": self.version_source,
                "command": self.command, "observed": self.observed(), "predicted": pred,
                "comparisons": [c.to_dict() for c in self.comparisons], "missing": self.missing,
                "unsupported": self.unsupported,
                "gpu_from_log": None if self.log_gpu is None else {
                    "gpu_mem_mib": self.log_gpu.mem_mib, "exact": self.log_gpu.exact, "how": self.log_gpu.how},
                "findings": [f.to_dict() for f in self.check.findings] if self.check else [],
                "lines_read": self.facts.lines_read, "lines_matched": self.facts.lines_matched,
                "plan": self.check.to_dict() if self.check else None}  # the rebuilt launch, as check --json


def _detect(lines: Iterator[str]) -> tuple[Engine, list[str]]:
    """The engine whose lines the head of the log has most of (ties: the first registered)."""
    from kvplan.engines import all_engines

    head = list(islice(lines, SNIFF_LINES))
    engines = all_engines()
    votes = [sum(1 for ln in head if e.log_dialect().looks_like(ln)) for e in engines]
    best = max(range(len(engines)), key=lambda i: votes[i])
    if votes[best] == 0:
        names = " or ".join(e.display_name for e in engines)
        raise KvplanError(f"no {names} startup line in this log", "pass the engine's own log (stdout/stderr of the "
                          "launch)")
    return engines[best], head


def parse_log(path: str) -> LogFacts:
    """Detect the engine and parse the whole log (streamed)."""
    from kvplan.logs.reader import iter_lines

    lines = iter_lines(path)
    engine, head = _detect(lines)
    return engine.log_dialect().parse(chain(head, lines))


def rebuild_command(facts: LogFacts, user_command: Sequence[str] | None, model_config: str | None = None) -> list[str]:
    """The launch as the log shows it; the user's command fills in what the log does not show. Every flag once:
    a flag both give is set in place to the log's value (``Engine.rewrite``); the engine's ``log_flags`` lead with
    the environment the log shows the engine read (``NAME=value``), put before the program unless the user's
    command sets the same variable."""
    from kvplan.engines import split_command

    engine = _engine(facts)
    env, log_flags = _split_env(engine.log_flags(facts.args))
    model = facts.args.get("model_path") or facts.args.get("model") or facts.model or model_config
    if user_command:
        cmd = split_command(list(user_command))
        if model and not any(t in cmd.argv for t in ("--model", "--model-path")) and cmd.program[-1] != "serve":
            log_flags = [engine.model_flag, str(model), *log_flags]
        changes = {**_shown_off(facts.args, engine.flag_table()),
                   **dict.fromkeys(engine.inert_flags(facts.args)),  # None: removed (the feature is shown off)
                   **_as_changes(log_flags, engine.flag_table())}
        merged = tokenize(engine.rewrite(cmd, changes))
        return [*(t for t in env if t.split("=", 1)[0] not in cmd.env), *merged]  # the log's values win
    if not model:
        raise KvplanError("the log does not name the model",
                          "add the launch command after --, or pass --model-config")
    return [*env, *engine.launch_argv(str(model), log_flags)]


def _shown_off(args: Any, table: Sequence[Any]) -> dict[str, str | None]:
    """Boolean flags the log shows off (``enable_hierarchical_cache=False`` in a ServerArgs dump): removed from the
    user's command, since the log's values win (a user's ``--enable-hierarchical-cache`` is not what ran)."""
    kinds = {f.key: f for f in table if f.kind == "bool"}
    return {kinds[k].name: None for k, v in args.items() if v is False and k in kinds}


def _split_env(tokens: list[str]) -> tuple[list[str], list[str]]:
    """(the leading ``NAME=value`` tokens, the flags after them)."""
    n = 0
    while n < len(tokens) and _ENV.match(tokens[n]):
        n += 1
    return tokens[:n], tokens[n:]


def _as_changes(flags: Sequence[str], table: Sequence[Any]) -> dict[str, str | None]:
    """``--flag value`` / bare boolean tokens as ``Engine.rewrite``'s changes ("" sets a boolean); an empty value
    is left out (``rewrite`` would read it as a boolean)."""
    kinds = {n: f.kind for f in table for n in (f.name, *f.aliases)}
    out: dict[str, str | None] = {}
    i = 0
    while i < len(flags):
        name = flags[i]
        takes_value = kinds.get(name, "str") != "bool" and i + 1 < len(flags) and (
            name in kinds or not flags[i + 1].startswith("--"))
        if not takes_value:
            out[name] = ""
            i += 1
            continue
        if flags[i + 1] != "":
            out[name] = flags[i + 1]
        i += 2
    return out


def explain(path: str, command: Sequence[str] | None = None, **options: Any) -> ExplainResult:
    """Explain the startup log at ``path``. Without ``gpu``/``gpu_mem_mib`` the GPU comes from the log's own memory
    figures (``Engine.log_gpu``); what the log lacks is named in ``missing``, and ``unsupported`` says in one line
    why nothing could be planned (the CLI then exits 2)."""
    from kvplan import api
    from kvplan.explain_inputs import gpu_from_log, why_unplanned

    facts = parse_log(path)
    engine = _engine(facts)
    argv = rebuild_command(facts, command, options.get("model_config"))
    opts = dict(options)
    version, vsrc = _version(facts, engine, opts.pop("engine_version", None))
    missing: list[str] = []
    opts.update(engine.observed_inputs(facts, missing))
    lacking = list(missing)
    gpu_given = bool(opts.get("gpu") or opts.get("gpu_mem_mib"))
    log_gpu = gpu_from_log(engine, facts, opts, missing)
    missing += engine.explain_notes(facts, version, not vsrc.startswith("not printed"), command)
    checked = {k: v for k, v in opts.items() if v is not None}
    try:
        result = api.check(argv, engine_version=version, **checked)
    except KvplanError as e:
        res = ExplainResult(facts, facts.engine or "?", version, vsrc, " ".join(argv), None, [], missing,
                            why_unplanned(str(e), lacking, gpu_given or log_gpu is not None))
        res.log_gpu = log_gpu
        return res
    result = contradicted_by_log(engine, facts, result, argv,
                                 lambda text: _plan_and_findings(text, engine_version=version, **checked))
    res = ExplainResult(facts, facts.engine or "?", version, vsrc, result.plan.command, result, [], missing)
    res.log_gpu = log_gpu
    res.comparisons = engine.compare(facts, result.plan)
    return res


def contradicted_by_log(engine: Engine, facts: LogFacts, result: CheckResult, argv: Sequence[str],
                        recheck: Callable[[str], tuple[Plan, Sequence[Finding]]]) -> CheckResult:
    """The check of the log's own launch, with the errors the log itself contradicts reported as info.

    The log is of a server that already started: when it shows the KV pool allocated (``Engine.observed_kv_tokens``
    > 0) and no error line, an error among the engine's ``startup_refusals`` (the engine refuses to start before
    that pool, or allocates none) did not happen on that log. Each becomes info with a note; when one of them
    carried a fix, the suggested command is made again from the findings that remain (``kvplan.suggest``, each
    fixed command checked by ``recheck``, as check does)."""
    from dataclasses import replace

    tokens = engine.observed_kv_tokens(facts, result.plan)
    refusals = set(engine.startup_refusals)
    hit = [f for f in result.findings if f.severity == "error" and f.id in refusals]
    if not tokens or facts.errors or not hit:
        return result
    note = f"the log shows the server started with {tokens:,} KV tokens: not an error on this log"
    findings = tuple(replace(f, severity="info", message=f"{f.message}; {note}") if f in hit else f
                     for f in result.findings)
    out = replace(result, findings=findings)
    if not any(f.flags for f in hit):
        return out  # the suggestion did not use them
    from kvplan.engines import split_command
    from kvplan.suggest import suggest

    cmd = split_command(list(argv))
    s = suggest(findings, lambda flags: engine.rewrite(cmd, flags), recheck)
    return replace(out, suggested_command=s.command, suggested_plan=s.plan, suggested_findings=s.findings,
                   suggestion_note=s.note)


def _plan_and_findings(text: str, **options: Any) -> tuple[Plan, tuple[Finding, ...]]:
    from kvplan import api

    r = api.check(text, **options)
    return r.plan, r.findings


def _version(facts: LogFacts, engine: Engine, given: str | None) -> tuple[str, str]:
    from kvplan.engines.versions import newest_allowed

    if given:
        return given, "--engine-version"
    if facts.version:
        from kvplan.explain_inputs import readable_version

        readable, note = readable_version(facts.version)
        return readable, "printed in the log" + (f" ({facts.version}, {note})" if note else "")
    guess = newest_allowed(facts.version_hint or "") or engine.newest_version
    hint = f" (formats: {facts.version_hint})" if facts.version_hint else ""
    return guess, f"not printed in the log{hint}; assumed {guess}, pass --engine-version"


def observed_inputs(facts: LogFacts, missing: list[str]) -> dict[str, float]:
    """Plan options taken from what the log measured (the figures no planner can know in advance)."""
    return _engine(facts).observed_inputs(facts, missing)
