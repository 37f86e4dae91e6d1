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
    retracted=("sglang:num_retracted_reqs",), requests=("sglang:num_requests_total",))


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
