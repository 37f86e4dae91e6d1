"""Host KV tiers that live outside an engine's own flags, sized by environment variables of third-party caches: the
rows each engine adds to its host ledger when its launch uses them (``engines/<engine>/ledger.py`` decides when).

- Mooncake store (``MOONCAKE_GLOBAL_SEGMENT_SIZE``): SGLang 0.5.9's HiCache L3 backend reads it as ``"4gb"`` by
  default, ``N gb`` = N GiB, a bare number = bytes (``mem_cache/storage/mooncake_store/mooncake_store.py::
  _parse_global_segment_size``), and each TP rank mounts ``global_segment_size // tp_size``
  (``MooncakeStore.__init__``: ``per_tp_global_segment_size``), with a 16 MiB local buffer
  (``DEFAULT_LOCAL_BUFFER_SIZE``; ``MOONCAKE_LOCAL_BUFFER_SIZE`` is not read by that version)
  https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py
- Dynamo KVBM (``DYN_KVBM_CPU_CACHE_GB``): pinned host blocks, ``GB × 1e9 / bytes_per_block`` where the leader sums
  the workers' block bytes ("For TP, sum bytes_per_block": a total for the engine,
  https://github.com/ai-dynamo/dynamo/blob/ae2223b2101caf18e2f6c7892c453546769a00b8/lib/llm/src/block_manager/
  distributed/leader.rs ``compute_num_blocks``); newer kvbm releases size every worker by its own block (per rank):
  the range's high end.
- AIBrix KV cache offloading (``AIBRIX_KV_CACHE_OL_L1_CACHE_CAPACITY_GB``, default 10): the L1 DRAM cache of each
  worker, ``GB × 1024**3`` bytes, pinned when its device is the CPU (``BaseKVCacheManager.__init__``,
  https://github.com/vllm-project/aibrix/blob/bdaac12e2d21c6f38fd69b0b187531ab1c9ea57c/python/aibrix_kvcache/
  aibrix_kvcache/cache_manager.py); its docs size it as the pod's memory / tensor-parallel size: per rank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kvplan import hostmem as hm
from kvplan.units import GB, GiB, MiB

MOONCAKE_SEGMENT_DEFAULT = "4gb"  # sglang 0.5.9 environ.py MOONCAKE_GLOBAL_SEGMENT_SIZE
MOONCAKE_LOCAL_BUFFER = 16 * MiB  # sglang 0.5.9 mooncake_store.py DEFAULT_LOCAL_BUFFER_SIZE
AIBRIX_L1_DEFAULT_GB = 10.0


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v >= 0 and v == v and v != float("inf") else None


def mooncake_segment_bytes(value: str) -> int | None:
    """``_parse_global_segment_size`` of SGLang 0.5.9: ``"Ngb"`` = N GiB, else an int of bytes; None: unreadable."""
    s = value.strip().lower()
    if s.endswith("gb"):
        num = s[:-2].strip()
        return int(num) * GiB if num.isdigit() else None
    return int(s) if s.isdigit() else None


def _mooncake_extra(extra_config: str | None) -> tuple[dict | None, str]:
    """``--hicache-storage-backend-extra-config`` when it configures the store (``MooncakeStore.__init__`` loads
    from it when it names ``master_server_address`` or ``client_server_address``): (config or None, note)."""
    import json

    if not extra_config:
        return None, ""
    if extra_config.startswith("@"):
        return None, f"extra config file {extra_config[1:]} not read: the environment's segment size assumed"
    try:
        cfg = json.loads(extra_config)
    except ValueError:
        return None, "--hicache-storage-backend-extra-config is not JSON: the environment's segment size assumed"
    if isinstance(cfg, dict) and (cfg.get("master_server_address") or cfg.get("client_server_address")):
        return cfg, ""
    return None, ""


def mooncake_rows(env: Mapping[str, str], ranks: int, tp_size: int, via: str,
                  extra_config: str | None = None) -> list[hm.LedgerRow]:
    """Each rank's Mooncake global segment and local buffer (SGLang's HiCache L3 backend, ``via`` says how); the
    segment from ``--hicache-storage-backend-extra-config`` when it configures the store, else the environment
    (``MooncakeStoreConfig.load_from_extra_config`` / ``load_from_env``)."""
    cfg, note = _mooncake_extra(extra_config)
    if cfg is not None:
        raw = str(cfg.get("global_segment_size", MOONCAKE_SEGMENT_DEFAULT))
        given, where = "global_segment_size" in cfg, "extra config global_segment_size"
        rdma = str(cfg.get("protocol", "tcp")).lower() == "rdma"
    else:
        raw = env.get("MOONCAKE_GLOBAL_SEGMENT_SIZE", MOONCAKE_SEGMENT_DEFAULT)
        given, where = "MOONCAKE_GLOBAL_SEGMENT_SIZE" in env, "MOONCAKE_GLOBAL_SEGMENT_SIZE"
        rdma = env.get("MOONCAKE_PROTOCOL", "tcp").lower() == "rdma"
        if "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH" in env:
            note = "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH's file is not read: the environment's segment size assumed"
    seg = mooncake_segment_bytes(raw)
    if seg is None:
        seg, raw = 4 * GiB, f"{raw!r} (unreadable; the 4gb default assumed)"
    per_rank = seg // max(1, tp_size)
    buf_note = "" if "MOONCAKE_LOCAL_BUFFER_SIZE" not in env else \
        "MOONCAKE_LOCAL_BUFFER_SIZE is not read by this version (16 MiB fixed)"
    return [hm.row("mooncake-segment", f"Mooncake global segment ({where}={raw}"
                   f"{'' if given else ', the default'} // {tp_size} TP ranks; {via})", "per rank", ranks, per_rank,
                   phases=(hm.STEADY,), memory=hm.PINNED if rdma else hm.PRIVATE,
                   certainty=hm.ESTIMATE if note else hm.EXACT,
                   source="mooncake_store.py::MooncakeStore.__init__ per_tp_global_segment_size "
                          "(registered for RDMA when the protocol is rdma)", note=note),
            hm.row("mooncake-buffer", f"Mooncake local buffer ({via})", "per rank", ranks, MOONCAKE_LOCAL_BUFFER,
                   phases=(hm.STEADY,), source="mooncake_store.py DEFAULT_LOCAL_BUFFER_SIZE", note=buf_note)]


def kvbm_rows(env: Mapping[str, str], ranks: int) -> list[hm.LedgerRow]:
    """Dynamo KVBM's pinned CPU cache, when ``DYN_KVBM_CPU_CACHE_GB`` is set (decimal GB)."""
    gb = _number(env.get("DYN_KVBM_CPU_CACHE_GB", ""))
    if not gb:
        return []
    total = int(gb * GB)
    return [hm.row("kvbm-cpu-cache", f"Dynamo KVBM CPU cache (DYN_KVBM_CPU_CACHE_GB={gb:g}, decimal GB)",
                   "per engine (its ranks' blocks summed)", 1, total, total, total * max(1, ranks),
                   phases=(hm.STEADY,), memory=hm.PINNED, certainty=hm.ESTIMATE,
                   source="dynamo block_manager/distributed/leader.rs compute_num_blocks (GB × 1e9 over the "
                          "summed block bytes); per rank in newer kvbm releases: the high end")]


def aibrix_rows(env: Mapping[str, str], ranks: int, active: bool) -> list[hm.LedgerRow]:
    """AIBrix's L1 DRAM cache per rank, when its variable is set or its connector is in the launch (default 10)."""
    raw = env.get("AIBRIX_KV_CACHE_OL_L1_CACHE_CAPACITY_GB")
    if raw is None and not active:
        return []
    if env.get("AIBRIX_KV_CACHE_OL_L1_CACHE_ENABLED", "1").strip().lower() in ("0", "false", "no"):
        return []
    gb = _number(raw) if raw is not None else AIBRIX_L1_DEFAULT_GB
    if gb is None:
        return []
    device = env.get("AIBRIX_KV_CACHE_OL_DEVICE", "cpu").lower()
    return [hm.row("aibrix-l1", f"AIBrix L1 cache (AIBRIX_KV_CACHE_OL_L1_CACHE_CAPACITY_GB={gb:g}"
                   f"{'' if raw is not None else ', the default'}, GiB)", "per rank", ranks, int(gb * GiB),
                   phases=(hm.STEADY,), memory=hm.PINNED if device == "cpu" else hm.PRIVATE,
                   source="aibrix_kvcache/cache_manager.py BaseKVCacheManager.__init__ (capacity × 1024**3, pinned "
                          "on the CPU device)")]


def connector_active(connector: str | None, *names: str) -> bool:
    """Whether a kv_connector class name names one of ``names`` (case-insensitive substring)."""
    c = (connector or "").lower()
    return any(re.search(n.lower(), c) for n in names)
