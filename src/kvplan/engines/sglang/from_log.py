"""What an SGLang log gives the plan: the launch flags of its ServerArgs dump, and the figures no planner can know in
advance (the free memory P before weights and the weights per rank), so ``kvplan explain`` reproduces the pool."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvplan.engines.cmdline import flags_from_values
from kvplan.engines.sglang.args import FLAGS, SGLangArgs
from kvplan.logs.facts import LogFacts

_NOT_FLAGS = {"model_path", "unknown_flags", "unmodeled"}


def log_flags(args: Mapping[str, Any]) -> list[str]:
    """Flags for the ServerArgs fields the log shows (only those that decide memory)."""
    if args.get("enable_hierarchical_cache") is not True:
        args = {k: v for k, v in args.items() if not k.startswith("hicache_")}  # inert without HiCache
    return flags_from_values(args.items(), FLAGS, set(SGLangArgs.__dataclass_fields__) - _NOT_FLAGS)


def inert_flags(args: Mapping[str, Any]) -> list[str]:
    """The ``--hicache-*`` flags when the dump shows ``enable_hierarchical_cache=False``: SGLang builds no host pool
    then (``scheduler.py::Scheduler.init_memory_pool_and_cache`` makes a HiRadixCache only when
    ``server_args.enable_hierarchical_cache``: https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/
    managers/scheduler.py), so a user's ``--hicache-size 300`` is not what ran."""
    if args.get("enable_hierarchical_cache") is not False:
        return []
    return [f.name for f in FLAGS if f.key.startswith("hicache_")]


def observed_inputs(facts: LogFacts, missing: list[str]) -> dict[str, float]:
    """``free_gib`` (P, the MIN over ranks, as SGLang takes it) and ``weights_gib`` (the MAX) from the log.

    weights = free before loading − free after it (what SGLang's formula subtracts), else the log's "mem usage=";
    P = "Load weight begin. avail mem=", else free after loading + what loading took."""
    ranks = list(facts.ranks.values())
    frees = [r.load_begin_avail_gib for r in ranks if r.load_begin_avail_gib is not None]
    weights = [r.load_begin_avail_gib - r.load_end_avail_gib for r in ranks
               if r.load_begin_avail_gib is not None and r.load_end_avail_gib is not None]
    weights = weights or [r.weights_gib for r in ranks if r.weights_gib is not None]
    if not frees:
        frees = [r.load_end_avail_gib + r.weights_gib for r in ranks
                 if r.load_end_avail_gib is not None and r.weights_gib is not None]
    out: dict[str, float] = {}
    if frees:
        out["free_gib"] = min(frees)
    else:
        missing.append("free GPU memory before weights ('Load weight begin. avail mem='): estimated from the "
                       "GPU total minus the CUDA context, ±1 GiB per rank")
    if weights:
        out["weights_gib"] = max(weights)
    else:
        missing.append("weights per rank ('Load weight end ... mem usage='): estimated from the checkpoint size")
    return out


def notes(facts: LogFacts, version: str, version_known: bool, command: Sequence[str] | None) -> list[str]:
    """Without a ServerArgs dump or a printed version, the default fraction is the assumed version's."""
    if "mem_fraction_static" in facts.args or version_known or (
            command and any(str(t).startswith("--mem-fraction-static") for t in command)):
        return []
    return [f"mem_fraction_static (no ServerArgs dump, version unknown): SGLang {version}'s default for this GPU was "
            "used; pass --engine-version or the launch command after --"]
