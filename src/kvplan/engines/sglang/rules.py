"""What changes between SGLang releases, as data: one row per version range, with the source read.

Rows are matched by "first version in which this behaviour is seen among the wheels read" (see
../shared/reference/sglang-memory.md section 0); versions between two read wheels take the older row.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvplan.engines.versions import Version, installed_version, require_known, select_row

OLDEST = "0.3.0"
NEWEST = "0.5.23"  # newest release read (PyPI, 2026-11-29)


@dataclass(frozen=True)
class SGLangRules:
    since: str
    # HiCache host check: HostKVCache.__init__ (mem_cache/memory_pool.py -> memory_pool_host.py -> pool_host/base.py)
    host_check: str  # "whole-host-per-rank" | "split-by-ranks" | "split-by-ranks-cgroup"
    host_pool_pinned_pow2: bool  # torch.empty(pin_memory=True): caching host allocator rounds to 2^k (inferred)
    host_tokens_round_down: bool  # <=0.5.5: tokens // page * page; 0.5.6+: (tokens // page + 1) * page
    host_must_exceed_device: bool  # 0.4.4..0.5.14 assert host > device; 0.5.15+ only warns
    hicache_auto_size: bool  # 0.5.21+: no ratio/size -> ratio fitted to 0.8 of the per-rank budget
    mm_reservation: bool  # 0.5.20+: SGLANG_VLM_CACHE_SIZE_MB (100 MiB) reserved for multimodal models
    # req_pool.py: "pool-0.3.0" | "pool-ctx8" (0.3.1) | "pool+1" (0.3.1.post2-0.4.6) | "pool" (0.4.7-0.5.9)
    # | "cap-estimate" (0.5.10-0.5.13) | "cap-half" (0.5.14+)
    max_running_rule: str
    mamba_padding_slot: bool  # 0.5.23: one padding slot in the Mamba state pool
    hicache_log: str  # format of the host-pool log line


_OLD_LOG = "Allocating {gb:.2f} GB host memory for hierarchical KV cache."
_NEW_LOG = "Allocating kv hierarchical KV host pool: {tokens} tokens, {gb:.2f} GB host memory."
# Boundaries read from the wheels on either side of each change (see tests/sglang/test_defaults.py and the
# reference notes); between two read wheels the older row applies.
ROWS: tuple[SGLangRules, ...] = (
    # model_runner.py::ModelRunner.init_memory_pool + tp_worker.py (v0.3.0, v0.3.1, v0.3.1.post2, v0.4.7 wheels)
    SGLangRules("0.3.0", "whole-host-per-rank", True, True, True, False, False, "pool-0.3.0", False, _OLD_LOG),
    SGLangRules("0.3.1", "whole-host-per-rank", True, True, True, False, False, "pool-ctx8", False, _OLD_LOG),
    SGLangRules("0.3.1.post2", "whole-host-per-rank", True, True, True, False, False, "pool+1", False, _OLD_LOG),
    SGLangRules("0.4.7", "whole-host-per-rank", True, True, True, False, False, "pool", False, _OLD_LOG),
    SGLangRules("0.5.6", "whole-host-per-rank", False, False, True, False, False, "pool", False, _OLD_LOG),
    SGLangRules("0.5.10", "whole-host-per-rank", False, False, True, False, False, "cap-estimate", False, _OLD_LOG),
    SGLangRules("0.5.14", "whole-host-per-rank", False, False, True, False, False, "cap-half", False, _OLD_LOG),
    SGLangRules("0.5.15", "whole-host-per-rank", False, False, False, False, False, "cap-half", False, _OLD_LOG),
    # PR #35540: (available - 10 GiB) // (world_size // nnodes) per rank
    SGLangRules("0.5.19", "split-by-ranks", False, False, False, False, False, "cap-half", False, _NEW_LOG),
    SGLangRules("0.5.20", "split-by-ranks", False, False, False, False, True, "cap-half", False, _NEW_LOG),
    # min(psutil, cgroup headroom) - 10 GiB, split by ranks; hicache_auto_size.py
    SGLangRules("0.5.21", "split-by-ranks-cgroup", False, False, False, True, True, "cap-half", False, _NEW_LOG),
    SGLangRules("0.5.23", "split-by-ranks-cgroup", False, False, False, True, True, "cap-half", True, _NEW_LOG),
)


def default_version() -> tuple[str, str]:
    """(version, where it came from): the installed sglang if any, else the newest known."""
    inst = installed_version("sglang")
    if inst:
        return inst, "installed sglang"
    return NEWEST, "newest known (no sglang installed; pass --engine-version)"


@lru_cache(maxsize=256)
def rules_for(version: str) -> SGLangRules:
    return select_row(ROWS, require_known(version, OLDEST, NEWEST, "SGLang"))


def mla_layout_problem(version: str, flags: tuple[str, ...]) -> str | None:
    """Why an MLA model would not get the MLA KV layout here, or None.

    0.3.0: ``model_runner.py::ModelRunner.profile_max_num_token`` uses the MLA cell only with ``--enable-mla``;
    0.3.1 .. 0.4.x: MLA is the default and ``--disable-mla`` turns it off (the MHA fallback is not modelled).
    https://github.com/sgl-project/sglang/blob/v0.3.0/python/sglang/srt/model_executor/model_runner.py"""
    if Version(version) < Version("0.3.1") and "--enable-mla" not in flags:
        return f"SGLang {version} keeps MLA models in an MHA-style KV layout unless --enable-mla is given"
    if "--disable-mla" in flags:
        return "--disable-mla stores MLA models in an MHA-style KV layout"
    return None
