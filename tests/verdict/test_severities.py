"""Calibrated severities (issue 13 item 3): error = the engine fails, hangs or is killed; warning = it starts with a
named risk; info = good to know. Figures are hand arithmetic written out here, not kvplan's output."""

from __future__ import annotations

import subprocess
import sys

from kvplan import check
from kvplan.units import GiB

SG = ["python", "-m", "sglang.launch_server", "--model-path"]
RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
INCIDENT_FIXED = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--mem-fraction-static", "0.88",
                  "--enable-hierarchical-cache", "--hicache-size", "48", "--trust-remote-code"]


def _sev(r, fid):
    return [f.severity for f in r.findings if f.id == fid]


def test_incident_fixed_command_is_ok_or_warn_without_error():
    # 8 ranks × 48e9 B = 384e9 B = 357.6 GiB of 449 GiB (79.6 %), under 449 − 10 GiB reserve
    r = check(INCIDENT_FIXED, gpu=RTX, host_mem_gib=449, engine_version="0.5.9")
    assert abs(r.plan.per_node.host_kv_bytes - 8 * 48e9) / (8 * 48e9) < 0.001
    assert r.verdict in ("ok", "warn") and r.exit_code == 0
    assert not [f for f in r.findings if f.severity == "error"]
    assert _sev(r, "host-check-blind") == ["info"]
    assert _sev(r, "host-near-full") == []


def test_incident_command_fails():
    cmd = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--mem-fraction-static", "0.93",
           "--enable-hierarchical-cache", "--hicache-size", "300"]
    r = check(cmd, gpu=RTX, host_mem_gib=449, engine_version="0.5.9")
    assert r.verdict == "fail" and r.exit_code == 1
    # 8 × 300e9 B = 2.4e12 B > 439 GiB: oversubscribed, and 0.5.9's per-rank check (300e9 < 439 GiB) will not stop it
    assert _sev(r, "host-oversubscribed") == ["error"] and _sev(r, "host-check-blind") == ["error"]


def test_node_at_99_percent_is_a_warning():
    # the case: 8 × 240e9 B = 1.92e12 B = 1,788.2 GiB pinned on 1,800 GiB (99.3 %); usable after SGLang's
    # 10 GiB reserve is 1,790 GiB, so it fits: a warning, not an error
    assert 8 * 240e9 < (1800 - 10) * GiB and 8 * 240e9 > 0.99 * 1800 * GiB
    cmd = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "240"]
    r = check(cmd, gpu="h200", host_mem_gib=1800, engine_version="0.5.9")
    assert _sev(r, "host-near-full") == ["warning"]
    assert _sev(r, "host-oversubscribed") == [] and _sev(r, "host-check-blind") == ["info"]
    assert r.verdict == "warn" and r.exit_code == 0
    assert r.suggested_command is not None and "--hicache-size" in r.suggested_command


def test_node_under_90_percent_has_no_host_warning():
    # 8 × 200e9 B = 1,490 GiB = 82.8 % of 1,800 GiB
    cmd = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "200"]
    r = check(cmd, gpu="h200", host_mem_gib=1800, engine_version="0.5.9")
    assert not [f for f in r.findings if f.id.startswith("host-") and f.severity != "info"]


def test_split_check_versions_do_not_raise_host_check_blind():
    cmd = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "48"]
    r = check(cmd, gpu=RTX, host_mem_gib=449, engine_version="0.5.20")
    assert _sev(r, "host-check-blind") == []


def test_broken_pipe_is_not_an_error():
    """`kvplan check ... | head -1` of a launch with warnings exits 0; of a failing one 1 (its verdict), quietly."""
    for args, want in (([], 0), (["--example"], 1)):
        base = ["check", "--gpu", RTX, "--host-mem-gib", "449", "--engine-version", "0.5.9"]
        argv = [*base, *args] if args else [*base, "--", *INCIDENT_FIXED]
        for fmt in ([], ["--json"]):
            p = subprocess.Popen([sys.executable, "-m", "kvplan", *argv[:1], *fmt, *argv[1:]],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert p.stdout is not None and p.stderr is not None
            p.stdout.close()  # the reader leaves before kvplan writes (as `head -1` does after its line)
            err = p.stderr.read().decode()
            assert p.wait(timeout=600) == want, (argv, fmt, err)
            assert "Traceback" not in err and "Broken pipe" not in err and "Exception ignored" not in err


def test_catalog_listing_into_a_closed_pipe_exits_0():
    p = subprocess.Popen([sys.executable, "-m", "kvplan", "gpus"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=600) == 0 and "Traceback" not in err
