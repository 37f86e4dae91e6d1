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
    # 8 × 237e9 B = 1,765.8 GiB pinned (under 1,800 − 10 GiB of SGLang's reserve) + the ledger's other terms on the
    # node: 8 scheduler processes × 2.24 GiB (torch + CUDA 1.96 GiB, pytorch#113326, + 0.28 GiB of imports) + the
    # frontend 0.47 + the detokenizer 0.39 GiB = 1,784.6 GiB = 99.1 % of 1,800 GiB: it fits, a warning
    assert 8 * 237e9 < (1800 - 10) * GiB and 8 * 237e9 / GiB + 8 * 2.24 + 0.86 < 1800
    assert 8 * 237e9 / GiB + 8 * 2.24 + 0.86 > 0.99 * 1800
    cmd = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "237"]
    r = check(cmd, gpu="h200", host_mem_gib=1800, engine_version="0.5.9")
    assert _sev(r, "host-near-full") == ["warning"]
    assert _sev(r, "host-oversubscribed") == [] and _sev(r, "host-check-blind") == ["info"]
    assert r.verdict == "warn" and r.exit_code == 0
    assert r.suggested_command is not None and "--hicache-size" in r.suggested_command


def test_the_rank_processes_tip_a_full_node_over():
    # issue 13's case: 8 × 240e9 B = 1,788.2 GiB of pools fits 1,800 − 10 GiB, but with the 8 scheduler processes
    # (8 × 2.24 GiB) and the frontends (0.86 GiB) the steady peak is 1,807 GiB > 1,800 GiB: an error now
    assert 8 * 240e9 / GiB < 1790 and 8 * 240e9 / GiB + 8 * 2.24 + 0.86 > 1800
    cmd = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "240"]
    r = check(cmd, gpu="h200", host_mem_gib=1800, engine_version="0.5.9")
    assert _sev(r, "host-oversubscribed") == ["error"] and _sev(r, "host-near-full") == []
    msg = next(f.message for f in r.findings if f.id == "host-oversubscribed")
    assert "8 × HiCache host pool 223.5 GiB" in msg and "8 × Scheduler process 2.2 GiB" in msg


def test_node_under_90_percent_has_no_host_warning():
    # 8 × 200e9 B = 1,490 GiB + 18.8 GiB of processes = 84 % of 1,800 GiB: no host-memory warning; but pinning
    # 1.6e12 B at 1 GB/s takes 1,600 s ≈ 27 minutes: host-pin-slow
    cmd = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "200"]
    r = check(cmd, gpu="h200", host_mem_gib=1800, engine_version="0.5.9")
    assert not [f for f in r.findings if f.id.startswith("host-") and f.severity != "info" and f.id != "host-pin-slow"]
    pin = next(f for f in r.findings if f.id == "host-pin-slow")
    assert pin.severity == "warning" and "1,600 GB pinned" in pin.message and "about 27 minutes" in pin.message


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
