"""A running vLLM server: its ``/metrics`` names, the ``vllm:cache_config_info`` labels and the ``/v1/models``
cards, as LogFacts (references: vllm-lmcache-memory.md §5). vLLM has no info endpoint of its own: a server that
answers only the OpenAI endpoints is taken for vLLM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvplan.engines.results import MetricNames
from kvplan.logs.facts import LogFacts

METRICS = MetricNames(
    prefix="vllm:", running=("vllm:num_requests_running", "vllm:num_running_reqs"),
    waiting=("vllm:num_requests_waiting", "vllm:num_queue_reqs"),
    usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    generation_tokens=("vllm:generation_tokens_total",), prompt_tokens=("vllm:prompt_tokens_total",),
    preemptions=("vllm:num_preemptions_total",),
    prefix_queries=("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    prefix_hits=("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    external_queries=("vllm:external_prefix_cache_queries_total",),
    external_hits=("vllm:external_prefix_cache_hits_total",), config_info="vllm:cache_config_info")


def server_facts(cc: Mapping[str, str], models: Sequence[Mapping[str, Any]]) -> LogFacts:
    """The model card (root, max_model_len) and the cache config labels (block size, utilization, KV bytes,
    dtype, the logged pool size) as the launch args and pool a log would show."""
    card = models[0] if models else {}
    args: dict[str, Any] = {"model": card.get("root") or card.get("id"), "max_model_len": card.get("max_model_len")}
    for label, key in (("block_size", "block_size"), ("gpu_memory_utilization", "gpu_memory_utilization"),
                       ("kv_cache_memory_bytes", "kv_cache_memory_bytes")):
        if cc.get(label) not in (None, "None", ""):
            args[key] = int(float(cc[label])) if key != "gpu_memory_utilization" else float(cc[label])
    if cc.get("cache_dtype") not in (None, "auto"):
        args["kv_cache_dtype"] = cc["cache_dtype"]
    f = LogFacts(engine="vllm", args={k: v for k, v in args.items() if v is not None}, model=args["model"])
    tokens = cc.get("kv_cache_size_tokens")
    f.kv_tokens = int(float(tokens)) if tokens not in (None, "None") else None
    return f
