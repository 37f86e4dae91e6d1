"""What a vLLM log gives the plan: the launch flags of its "non-default args" / engine config line, and the KV memory
each worker reported ("Available KV cache memory"), which replaces the profiling kvplan can only estimate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.engines.cmdline import flags_from_values
from kvplan.engines.vllm.args import FLAGS, VLLMArgs
from kvplan.logs.facts import LogFacts

SYNONYMS = {"max_seq_len": "max_model_len", "model_path": "model"}  # config-line names -> flag keys
_NOT_FLAGS = {"model", "env", "unknown_flags", "flags_given", "kv_transfer_config"}


def log_flags(args: Mapping[str, Any]) -> list[str]:
    """Flags for the args the log shows (only those that decide memory), each once, after the environment the CPU
    platform reads (``platform_env``).

    The "non-default args" line and the engine config line name some args twice (``max_model_len`` /
    ``max_seq_len``, ``dtype``): one flag each, at the first name's place, with the last value the log printed (the
    config line's, as the engine resolved it); a None never replaces a value."""
    args = dict(args)
    dtype = args.get("dtype")
    if isinstance(dtype, str) and dtype.startswith("torch."):  # the engine config line prints the resolved torch
        args["dtype"] = dtype.removeprefix("torch.")  # dtype ("dtype=torch.bfloat16"); --dtype takes its name
    env = platform_env(args)
    # prefix caching only matters to a hybrid GDN model (hybrid.py: mamba "align" mode, on by default from 0.32),
    # so only its being off is carried over
    off = str(args.pop("enable_prefix_caching", "")).lower() == "false"
    args.pop("no_enable_prefix_caching", None)
    once: dict[str, Any] = {}
    for k, v in args.items():
        key = SYNONYMS.get(k, k)
        if v is not None or key not in once:
            once[key] = v  # an existing key keeps its place
    flags = flags_from_values(once.items(), FLAGS, set(VLLMArgs.__dataclass_fields__) - _NOT_FLAGS)
    return env + flags + (["--no-enable-prefix-caching"] if off else [])


def platform_env(args: Mapping[str, Any]) -> list[str]:
    """The CPU platform as ``VLLMArgs.is_cpu`` reads it, when the log is vLLM-CPU's (``device_config=cpu`` on the
    engine config line, or its "set (a/b) GiB for KV cache" line) and shows no ``--device``, without a flag the log
    did not show (``--device`` is gone from 0.32's argparse): ``VLLM_CPU_KVCACHE_SPACE=N`` with the default the log
    printed ("VLLM_CPU_KVCACHE_SPACE ... using N by default", whole GiB), else ``VLLM_TARGET_DEVICE=cpu`` (the
    platform switch ``cpu_platform_plugin`` reads; an empty VLLM_CPU_KVCACHE_SPACE would stop the engine:
    ``vllm/envs.py`` reads it with ``int()``)."""
    cpu = str(args.get("device_config", "")).lower() == "cpu" or args.get("node_memory_gib") is not None
    if not cpu or args.get("device"):
        return []
    space = args.get("VLLM_CPU_KVCACHE_SPACE")
    try:
        gib = float(space) if space is not None else None
    except (TypeError, ValueError):
        gib = None
    if gib is not None and gib.is_integer() and gib > 0:
        return [f"VLLM_CPU_KVCACHE_SPACE={int(gib)}"]
    return ["VLLM_TARGET_DEVICE=cpu"]


def observed_inputs(facts: LogFacts, missing: list[str]) -> dict[str, float]:
    """``kv_memory_gib``: the minimum worker's "Available KV cache memory" (it sets the block count; rounded to
    0.01 GiB; a negative figure means no KV at all)."""
    if facts.args.get("kv_cache_memory_bytes"):
        return {}  # the launch gave the exact size; the log's figure is the same number rounded to 0.01 GiB
    avail = [r.available_kv_gib for r in facts.ranks.values() if r.available_kv_gib is not None]
    if avail:
        return {"kv_memory_gib": max(0.0, min(avail))}
    missing.append("KV memory per worker ('Available KV cache memory'): estimated from gpu_memory_utilization minus "
                   "weights, activation peak and CUDA graphs, ±1-2 GiB per rank")
    return {}
