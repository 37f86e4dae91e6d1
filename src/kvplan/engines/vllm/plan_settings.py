"""The options ``kvplan plan --engine vllm`` takes: each one of vLLM's launch flags (``engine/arg_utils.py``), with
its unit and scope."""

from __future__ import annotations

from kvplan.engines.results import PlanSetting

SETTINGS: tuple[PlanSetting, ...] = (
    PlanSetting("gpu_memory_utilization", float, "fraction (0-1) of each GPU's total memory vLLM may use: weights, "
                "activations, CUDA graphs and KV cache (default 0.9, 0.92 on newer versions)"),
    PlanSetting("kv_cache_dtype", str, "KV cache element type: auto (model dtype), fp8, fp8_e4m3, fp8_e5m2, ..."),
    PlanSetting("max_model_len", int, "tokens of one request at most (prompt + output; default: config.json)"),
    PlanSetting("max_num_seqs", int, "requests scheduled at once per engine (default: by version and GPU)"),
    PlanSetting("max_num_batched_tokens", int, "tokens per scheduler step per engine (default: by version and GPU)"),
    PlanSetting("block_size", int, "tokens per KV block (default 16; MLA backends choose their own)"),
    PlanSetting("kv_offloading_size", float, "host KV offloading (0.14+): GiB in total for the engine, split over "
                "its TP × PP workers"),
    PlanSetting("cpu_offload_gb", float, "GiB of weights per GPU kept in pinned host memory"),
)
