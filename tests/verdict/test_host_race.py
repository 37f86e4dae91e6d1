"""The race of ranks that each read one free-memory figure (issue 25 item 4; sglang PR #35540, issue #38156):
host-check-blind before the split check, host-check-race with it. Hand arithmetic of SGLang's check:
``(available − 10 GiB) // ranks`` per rank, a late rank's reading lower by its peers' pools."""

from __future__ import annotations

from kvplan import check

SG = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "2",
      "--enable-hierarchical-cache"]


def _race(size_gb: str, version: str = "0.5.20"):
    r = check([*SG, "--hicache-size", size_gb], gpu="h100", host_mem_gib=100, engine_version=version)
    return r, [f for f in r.findings if f.id == "host-check-race"]


def test_a_late_rank_can_refuse_a_launch_that_fits():
    # Qwen3-8B TP2: 4 KV heads × 128 × 2 × 36 layers × 2 B = 73,728 B/token per rank; 40e9 // 73,728 = 542,534
    # tokens + one page = 542,535 × 73,728 = 40,000,020,480 B per rank. The check divides 100 − 10 = 90 GiB
    # (96,636,764,160 B) by 2 ranks: 48,318,382,080 B each, so the first rank passes; the second, after its peer
    # pinned 40e9 B, reads (96,636,764,160 − 40,000,020,480) / 2 = 28,318,371,840 B = 26.4 GiB < 37.3 GiB
    r, race = _race("40")
    assert r.plan.per_rank.host_kv_bytes == 40_000_020_480
    assert len(race) == 1 and race[0].severity == "warning", r.findings
    assert "26.4 GiB" in race[0].message and "#38156" in race[0].message and "45.0 GiB" in race[0].message
    # the fix: (2 × 2 − 1) pools within 96,636,764,160 B: 32.2e9 B, 32 GB per rank; and 32 GB no longer races
    assert "--hicache-size 32 " in race[0].fix
    assert _race("32")[1] == []
    assert _race("30")[1] == []  # 3 × 30e9 = 90e9 B within 96.6e9 B


def test_the_race_has_two_sides_by_version():
    # 0.5.9 checks each rank against the whole host: both ranks read the same free memory and pass together
    r, race = _race("40", "0.5.9")
    blind = next(f for f in r.findings if f.id == "host-check-blind")
    assert race == [] and "same free memory before any of them allocates" in blind.message
    # 0.5.23 auto-sizes the pool from one snapshot when no size or ratio is given: no race
    auto = check(SG, gpu="h100", host_mem_gib=100, engine_version="0.5.23")
    assert not [f for f in auto.findings if f.id == "host-check-race"]
    # 0.5.20 with one rank: no peer to race
    one = check(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--enable-hierarchical-cache",
                 "--hicache-size", "60"], gpu="h100", host_mem_gib=100, engine_version="0.5.20")
    assert not [f for f in one.findings if f.id == "host-check-race"]
