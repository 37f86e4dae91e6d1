"""The options ``kvplan plan --engine sglang`` takes: each one of SGLang's launch flags (``server_args.py``), with
its unit and scope."""

from __future__ import annotations

from kvplan.engines.results import PlanSetting

SETTINGS: tuple[PlanSetting, ...] = (
    PlanSetting("mem_fraction_static", float, "fraction (0-1) of each rank's free GPU memory, measured before the "
                "weights load, that holds weights + KV pool (default: the version's own formula)"),
    PlanSetting("kv_cache_dtype", str, "KV cache element type: auto (model dtype), fp8_e4m3, fp8_e5m2, ..."),
    PlanSetting("context_length", int, "tokens of one request at most (prompt + output; default: config.json)"),
    PlanSetting("max_running_requests", int, "requests running at once per DP worker (default: from the pool)"),
    PlanSetting("page_size", int, "tokens per KV page (default 1; larger with some attention backends)"),
    PlanSetting("enable_dp_attention", bool, "DP attention: each of --dp groups keeps its own requests and KV "
                "(needs --dp > 1)"),
    PlanSetting("hicache_size", float, "HiCache host KV pool, decimal GB (1e9 B) per rank; turns HiCache on"),
    PlanSetting("hicache_ratio", float, "HiCache host pool as host tokens / GPU tokens per rank; turns HiCache on"),
)
