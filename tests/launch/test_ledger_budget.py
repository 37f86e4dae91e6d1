"""What the launch watchdog takes from the plan's host ledger (issue 25): the node's loading and steady totals it
expects, said in the preflight and the diagnosis, and a stall timeout long enough for the pinning the plan expects
(pinning a host pool logs nothing while memory climbs). No process is started here."""

from __future__ import annotations

from kvplan import check
from kvplan.cli.launch import _stall_timeout
from kvplan.launch.verdict import expected_line
from kvplan.launch.watchdog import DEFAULT_STALL_S

SEEDS = ["python", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
         "--mem-fraction-static", "0.88", "--trust-remote-code", "--enable-hierarchical-cache", "--hicache-size", "48"]
HW = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "host_mem_gib": 449.0, "engine_version": "0.5.9"}


class Rep:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def preflight(self, lines: list[str]) -> None:
        self.lines.extend(lines)


def test_the_stall_timeout_covers_the_slowest_pinning_the_plan_expects():
    res = check(SEEDS, **HW)
    rep = Rep()
    # 384.0005e9 B pinned (8 × 48e9 B + a page each) at the calibration's slowest 0.4 GB/s = 960.001 s, rounded up,
    # > the 300 s default
    assert _stall_timeout(None, res, rep) == 961.0
    assert "stall timeout 961 s" in rep.lines[0]
    assert _stall_timeout(120.0, res, Rep()) == 120.0 and _stall_timeout(0.0, res, Rep()) is None  # as given
    small = check(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"], **HW)
    assert _stall_timeout(None, small, Rep()) == DEFAULT_STALL_S
    assert _stall_timeout(None, None, Rep()) == DEFAULT_STALL_S


def test_the_expected_totals_are_said():
    line = expected_line(check(SEEDS, **HW).host_ledger)
    assert line.startswith("the plan's host ledger expects loading 18.") and "steady 376." in line
    assert "pinning 384 GB takes about 384 s (38–960 s)" in line
