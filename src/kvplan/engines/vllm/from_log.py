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
    """Flags for the args the log shows (only those that decide memory); the engine config line says the device."""
    args = dict(args)
    if isinstance(args.get("dtype"), str) and args["dtype"].startswith("torch."):
        args["dtype"] = args["dtype"][6:]  # the config line prints ModelConfig.dtype, a torch dtype: torch.bfloat16
    if str(args.get("device_config", "")).lower() == "cpu":
        args["device"] = "cpu"
    dtype = args.get("dtype")
    if isinstance(dtype, str) and dtype.startswith("torch."):  # the engine config line prints the resolved torch
        args["dtype"] = dtype.removeprefix("torch.")  # dtype ("dtype=torch.bfloat16"); --dtype takes its name
    # prefix caching only matters to a hybrid GDN model (hybrid.py: mamba "align" mode, on by default from 0.32),
    # so only its being off is carried over
    off = str(args.pop("enable_prefix_caching", "")).lower() == "false"
    args.pop("no_enable_prefix_caching", None)
    return flags_from_values([(SYNONYMS.get(k, k), v) for k, v in args.items()], FLAGS,
                             set(VLLMArgs.__dataclass_fields__) - _NOT_FLAGS) + (["--no-enable-prefix-caching"] if off
                                                                                 else [])


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
