"""What changes between SGLang releases, as data: one row per version range, with the source read.

Rows are matched by "first version in which this behaviour is seen among the wheels read" (see
../shared/reference/sglang-memory.md section 0); versions between two read wheels take the older row.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.versions import Version, installed_version
from kvplan.errors import UnknownVersion

OLDEST = "0.4.0"
NEWEST = "0.5.23"  # newest release read (PyPI, 2026-11-29)


@dataclass(frozen=True)
class SGLangRules:
    since: str
    # HiCache host check (mem_cache/memory_pool_host.py::HostKVCache.__init__ up to 0.5.15;
    # mem_cache/host_memory.py + hicache_auto_size.py in 0.5.23)
    host_check: str  # "whole-host-per-rank" | "split-by-ranks" | "split-by-ranks-cgroup"
    host_pool_pinned_pow2: bool  # <=0.5.3 torch pin_memory=True caching host allocator (inferred)
    host_tokens_round_down: bool  # 0.4.6 rounded host tokens down to pages; later: up plus one spare page
    host_must_exceed_device: bool  # <=0.5.9 assert host_tokens > device_tokens
    hicache_auto_size: bool  # 0.5.23: no ratio/size -> ratio fitted to 0.8 of the per-rank headroom
    mm_reservation: bool  # 0.5.20+: SGLANG_VLM_CACHE_SIZE_MB (100 MiB) reserved for multimodal models
    max_running_caps_at_half_pool: bool  # >0.5.9: explicit max_running_requests capped at tokens // 2
    mamba_padding_slot: bool  # 0.5.23: one padding slot in the Mamba state pool
    hicache_log: str  # format of the host-pool log line


ROWS: tuple[SGLangRules, ...] = (
    SGLangRules("0.4.0", "whole-host-per-rank", True, False, True, False, False, False, False,
                "Allocating {gb:.2f} GB host memory for hierarchical KV cache."),
    SGLangRules("0.4.7", "whole-host-per-rank", True, False, True, False, False, False, False,
                "Allocating {gb:.2f} GB host memory for hierarchical KV cache."),
    SGLangRules("0.5.6", "whole-host-per-rank", False, False, True, False, False, False, False,
                "Allocating {gb:.2f} GB host memory for hierarchical KV cache."),
    SGLangRules("0.5.10", "whole-host-per-rank", False, False, False, False, False, True, False,
                "Allocating {gb:.2f} GB host memory for hierarchical KV cache."),
    SGLangRules("0.5.20", "split-by-ranks", False, False, False, False, True, True, False,
                "Allocating kv hierarchical KV host pool: {tokens} tokens, {gb:.2f} GB host memory."),
    SGLangRules("0.5.23", "split-by-ranks-cgroup", False, False, False, True, True, True, True,
                "Allocating kv hierarchical KV host pool: {tokens} tokens, {gb:.2f} GB host memory."),
)
# 0.4.6 alone rounded host tokens down (mem_cache/memory_pool_host.py in 0.4.6.post5).
ROUND_DOWN = ("0.4.6", "0.4.7")


def default_version() -> tuple[str, str]:
    """(version, where it came from): the installed sglang if any, else the newest known."""
    inst = installed_version("sglang")
    if inst:
        return inst, "installed sglang"
    return NEWEST, "newest known (no sglang installed; pass --engine-version)"


def rules_for(version: str) -> SGLangRules:
    v = Version(version)
    if v < Version(OLDEST) or v > Version(NEWEST + ".post99"):
        raise UnknownVersion(f"SGLang {version} is outside what kvplan has read ({OLDEST} .. {NEWEST})",
                             f"pass --engine-version between {OLDEST} and {NEWEST}")
    row = ROWS[0]
    for r in ROWS:
        if v >= Version(r.since):
            row = r
    if Version(ROUND_DOWN[0]) <= v < Version(ROUND_DOWN[1]):
        from dataclasses import replace

        row = replace(row, host_tokens_round_down=True)
    return row
