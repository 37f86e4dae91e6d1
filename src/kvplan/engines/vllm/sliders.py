"""The planning page's sliders (kvplan serve; ``engines.results.SLIDER_NAMES``) as vLLM flags, and what a vLLM plan
shows on them. vLLM has no DP-attention flag and no HiCache ratio: those two sliders are off."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kvplan.engines.results import SliderView
from kvplan.engines.vllm.settings import vllm_settings
from kvplan.errors import KvplanError
from kvplan.result import Plan
from kvplan.units import GiB

NATIVE_FLAG = "--kv-offloading-size"  # the host KV size slider (GiB for the whole engine)


def flags(s: Mapping[str, Any]) -> dict[str, str | None]:
    """Flags (canonical names, "" for a boolean, None to remove) that the sliders set."""
    if s.get("dp_attention") or s.get("hicache_ratio"):
        raise KvplanError("vLLM has no DP-attention or HiCache-ratio flag",
                          "use TP/DP and the host KV size (--kv-offloading-size) for vLLM")
    f: dict[str, str | None] = {}
    if "fraction" in s:
        f["--gpu-memory-utilization"] = f"{s['fraction']:g}"
    if "tp" in s:
        f["--tensor-parallel-size"] = str(s["tp"])
    if "dp" in s:
        f["--data-parallel-size"] = str(s["dp"])
    if "fp8_kv" in s:
        f["--kv-cache-dtype"] = "fp8" if s["fp8_kv"] else None
    if "max_running" in s:
        f["--max-num-seqs"] = str(s["max_running"]) if s["max_running"] else None
    if "host_kv" in s:
        f[NATIVE_FLAG] = f"{s['host_kv']:g}" if s["host_kv"] else None
    return f


def view(plan: Plan) -> SliderView:
    s = vllm_settings(plan)
    native = next((t for t in s.host_tiers if t.flag == NATIVE_FLAG), None)
    host = (native.shared_bytes if native.shared_bytes is not None else sum(native.per_rank_bytes)) if native else 0
    return SliderView(
        values={"fraction": s.gpu_memory_utilization, "tp": s.tensor_parallel_size, "dp": s.data_parallel_size,
                "fp8_kv": s.kv_cache_dtype.startswith("fp8"), "host_kv": math.floor(host / GiB + 0.5)},
        labels={"fraction": "gpu_memory_utilization", "host_kv": "host KV: --kv-offloading-size (GiB per engine)",
                "max_running": "--max-num-seqs (0 = engine default)"},
        off=("hicache_ratio", "dp_attention"))
