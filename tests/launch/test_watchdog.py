"""The watchdog's decisions on sample sequences (pure logic; the real-process tests are in test_faults.py)."""

from __future__ import annotations

from kvplan.launch.watchdog import Cgroup, Limits, Sample, Watchdog, default_host_reserve, meminfo
from kvplan.units import GiB, MiB


def _s(t, avail=20 * GiB, tree=0, silent=0.0, total=24 * GiB):
    return Sample(t, total, avail, None, 0, tree, 0, 1, silent)


def test_default_reserve_scales_with_ram():
    assert default_host_reserve(24 * GiB) == 4 * GiB  # small box: the 4 GiB floor
    assert default_host_reserve(449 * GiB) == int(0.05 * 449 * GiB)  # the incident's node: 22.45 GiB
    assert default_host_reserve(4096 * GiB) == 32 * GiB  # the cap


def test_reserve_crossing_is_predicted_one_sample_ahead():
    w = Watchdog(Limits(host_reserve=4 * GiB))
    assert w.evaluate(_s(0.0, avail=6 * GiB, tree=1 * GiB), False) is None
    # falling 4 GiB/s while the launch grows: 5 GiB now, 4 GiB in 0.25 s -> abort now
    a = w.evaluate(_s(0.25, avail=5 * GiB - 1, tree=2 * GiB), False)
    assert a and a.reason == "host-memory" and a.signal == "host-available" and "would cross" in a.message


def test_reserve_drop_by_someone_else_is_not_predicted_against_us():
    w = Watchdog(Limits(host_reserve=4 * GiB))
    w.evaluate(_s(0.0, avail=6 * GiB, tree=1 * GiB), False)
    assert w.evaluate(_s(0.25, avail=5 * GiB - 1, tree=1 * GiB), False) is None  # the launch is flat
    a = w.evaluate(_s(0.5, avail=3 * GiB, tree=1 * GiB), False)  # but below the reserve is below the reserve
    assert a and a.reason == "host-memory"


def test_budget_now_and_ahead():
    w = Watchdog(Limits(host_reserve=GiB, host_budget=300 * MiB))
    assert w.evaluate(_s(0.0, tree=100 * MiB), False) is None
    a = w.evaluate(_s(0.25, tree=210 * MiB), False)  # +440 MiB/s: past 300 MiB within the next sample
    assert a and a.signal == "host-budget" and "would exceed" in a.message
    w = Watchdog(Limits(host_reserve=GiB, host_budget=300 * MiB))
    a = w.evaluate(_s(0.0, tree=301 * MiB), False)
    assert a and "exceeds" in a.message and a.numbers["host_budget_bytes"] == 300 * MiB


def test_stall_needs_silence_and_climbing_memory():
    lim = Limits(host_reserve=GiB, stall_timeout=2.0, ready_timeout=None)
    w = Watchdog(lim)
    # silent and flat: never a stall
    for i in range(40):
        assert w.evaluate(_s(i * 0.25, tree=500 * MiB, silent=i * 0.25), False) is None
    w = Watchdog(lim)
    a = None
    for i in range(12):
        a = w.evaluate(_s(i * 0.25, tree=(500 + 8 * i) * MiB, silent=i * 0.25), False)
        if a:
            break
    assert a and a.reason == "stall" and a.numbers["silent_s"] >= 2.0
    # after ready, silence is normal
    w = Watchdog(lim)
    assert all(w.evaluate(_s(i * 0.25, tree=(500 + 8 * i) * MiB, silent=i * 0.25), True) is None for i in range(20))


def test_log_growth_resets_the_stall_baseline():
    w = Watchdog(Limits(host_reserve=GiB, stall_timeout=1.0))
    for i in range(8):  # memory climbs while the log keeps growing: not a stall
        assert w.evaluate(_s(i * 0.25, tree=(100 + 50 * i) * MiB, silent=0.1), False) is None


def test_ready_timeout():
    w = Watchdog(Limits(host_reserve=GiB, ready_timeout=1.0))
    assert w.evaluate(_s(0.9), False) is None
    a = w.evaluate(_s(1.0), False)
    assert a and a.reason == "ready-timeout"
    assert Watchdog(Limits(host_reserve=GiB, ready_timeout=1.0)).evaluate(_s(5.0), True) is None


def test_probes_read_this_machine():
    total, avail = meminfo()
    assert total > avail > 0
    cg = Cgroup()
    assert cg.available() is None or cg.available() > 0
