"""The planning page's sliders (kvplan serve; ``engines.results.SLIDER_NAMES``) as SGLang flags, and what an SGLang
plan shows on them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.engines.results import SliderView
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Plan


def flags(s: Mapping[str, Any]) -> dict[str, str | None]:
    """Flags (canonical names, "" for a boolean, None to remove) that the sliders set; a host KV size of 0 with no
    ratio turns HiCache off."""
    f: dict[str, str | None] = {}
    if "fraction" in s:
        f["--mem-fraction-static"] = f"{s['fraction']:g}"
    if "tp" in s:
        f["--tp-size"] = str(s["tp"])
    if "dp" in s:
        f["--dp-size"] = str(s["dp"])
    if "fp8_kv" in s:
        f["--kv-cache-dtype"] = "fp8_e4m3" if s["fp8_kv"] else None
    if "max_running" in s:
        f["--max-running-requests"] = str(s["max_running"]) if s["max_running"] else None
    if "dp_attention" in s:
        f["--enable-dp-attention"] = "" if s["dp_attention"] else None
    if "host_kv" in s or "hicache_ratio" in s:
        size, ratio = s.get("host_kv"), s.get("hicache_ratio")
        if size == 0 and not ratio:
            f.update({"--enable-hierarchical-cache": None, "--hicache-size": None, "--hicache-ratio": None})
        else:
            f["--enable-hierarchical-cache"] = ""
            if size is not None:
                f["--hicache-size"] = f"{size:g}" if size else None
            if ratio is not None:
                f["--hicache-ratio"] = f"{ratio:g}" if ratio else None
    return f


def view(plan: Plan) -> SliderView:
    s = sglang_settings(plan)
    h = s.hicache
    return SliderView(
        values={"fraction": s.mem_fraction_static, "tp": s.tp_size, "dp": s.dp_size,
                "fp8_kv": s.kv_cache_dtype.startswith("fp8"),
                "host_kv": (h.size_gb_per_rank or 0) if h.enabled else 0,
                "hicache_ratio": h.ratio if h.enabled and h.ratio else 0, "dp_attention": s.enable_dp_attention},
        labels={"fraction": "mem_fraction_static", "host_kv": "host KV: --hicache-size (GB per rank)",
                "max_running": "--max-running-requests (0 = engine default)"})
