"""A running SGLang server: its ``/metrics`` names (needs ``--enable-metrics``) and what ``/get_server_info``
(``/server_info`` in newer versions) says, as LogFacts (references: sglang-memory.md §4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.engines.reported import obj, plain, text, whole
from kvplan.engines.results import MetricNames
from kvplan.logs.facts import LogFacts

INFO_PATHS = ("/get_server_info", "/server_info")
METRICS = MetricNames(
    prefix="sglang:", running=("sglang:num_requests_running", "sglang:num_running_reqs"),
    waiting=("sglang:num_requests_waiting", "sglang:num_queue_reqs"), usage=("sglang:token_usage",),
    generation_tokens=("sglang:generation_tokens_total",), prompt_tokens=("sglang:prompt_tokens_total",),
    used_tokens=("sglang:num_used_tokens",), host_used_tokens=("sglang:hicache_host_used_tokens",),
    host_total_tokens=("sglang:hicache_host_total_tokens",), accept_length=("sglang:spec_accept_length",),
    gen_throughput=("sglang:gen_throughput",), cached_tokens=("sglang:cached_tokens_total",),
    retracted=("sglang:num_retracted_reqs",), requests=("sglang:num_requests_total",),
    pool_tokens=("sglang:max_total_num_tokens",))


def metrics_facts(model: str | None, pool_tokens: float | None, ignored: list[str]) -> LogFacts | None:
    """What a metrics store holds of a server whose endpoints are not read: the model label (``--model-path`` as
    served, the default ``--served-model-name``) and ``sglang:max_total_num_tokens`` (the pool of one DP group, set
    once at start; exported since 0.5.9: sglang-memory.md §4)."""
    if not model and pool_tokens is None:
        return None
    f = LogFacts(engine="sglang", args={"model_path": model} if model else {}, model=model)
    f.kv_tokens = whole("sglang:max_total_num_tokens", pool_tokens, ignored)
    return f


def server_facts(info: Mapping[str, Any], ignored: list[str]) -> LogFacts | None:
    """The launch args, the pool (max_total_num_tokens) and the running cap per DP worker the server reports; every
    value checked for its type and range (what does not fit is left out and named in ``ignored``)."""
    if not info:
        return None
    f = LogFacts(engine="sglang", args=plain(info), model=text(info.get("model_path")),
                 version=text(info.get("version")))
    sched = obj(info.get("scheduler_info"))
    states = info.get("internal_states")
    st0 = obj(states[0]) if isinstance(states, list) and states else {}
    mem = obj(st0.get("memory_usage"))
    tokens = sched.get("max_total_num_tokens") or info.get("max_total_num_tokens") or mem.get("token_capacity")
    f.kv_tokens = whole("max_total_num_tokens", tokens, ignored)
    f.max_running_requests = whole("effective_max_running_requests_per_dp",
                                   st0.get("effective_max_running_requests_per_dp"), ignored, hi=1 << 31)
    return f
