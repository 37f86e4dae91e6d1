"""A running vLLM server: its ``/metrics`` names, the ``vllm:cache_config_info`` labels and the ``/v1/models``
cards, as LogFacts (references: vllm-lmcache-memory.md §5). vLLM has no info endpoint of its own: a server that
answers only the OpenAI endpoints is taken for vLLM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvplan.engines.reported import obj, share, text, whole
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


def server_facts(cc: Mapping[str, str], models: Sequence[Mapping[str, Any]], ignored: list[str]) -> LogFacts:
    """The model card (root, max_model_len) and the cache config labels (block size, utilization, KV bytes,
    dtype, the logged pool size) as the launch args and pool a log would show; every value checked for its type and
    range (what does not fit is left out and named in ``ignored``)."""
    card = obj(models[0]) if models else {}
    model = text(card.get("root")) or text(card.get("id"))
    args: dict[str, Any] = {"model": model,
                            "max_model_len": whole("max_model_len", card.get("max_model_len"), ignored, hi=1 << 31)}
    for label in ("block_size", "kv_cache_memory_bytes"):
        args[label] = whole(f"cache_config_info {label}", cc.get(label), ignored, hi=(1 << 60) - 1)
    args["gpu_memory_utilization"] = share("cache_config_info gpu_memory_utilization",
                                           cc.get("gpu_memory_utilization"), ignored)
    if cc.get("cache_dtype") not in (None, "auto") and text(cc.get("cache_dtype")):
        args["kv_cache_dtype"] = cc["cache_dtype"]
    f = LogFacts(engine="vllm", args={k: v for k, v in args.items() if v is not None}, model=model)
    f.kv_tokens = whole("cache_config_info kv_cache_size_tokens", cc.get("kv_cache_size_tokens"), ignored)
    return f
