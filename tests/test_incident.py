"""The HiCache incident (DEVELOPERS.md, ../shared/seeds): Kimi-K2.5, TP8, --hicache-size 300 on a 449 GiB host.

Facts pinned here come from the incident and from arithmetic, not from kvplan's output:
- MLA cell: (kv_lora_rank 512 + qk_rope_head_dim 64) × 61 layers × 2 B = 70,272 B/token per rank;
- --hicache-size is decimal GB per rank: 8 × 300e9 = 2.4e12 B on one node;
- the fix that worked was --hicache-size 48 (8 × 48 GB = 384 GB on 449 GiB = 482 GB).
"""

from __future__ import annotations

import re

from tests.conftest import check_json, run_cli

MLA_CELL = (512 + 64) * 61 * 2


def test_incident_fails_with_the_four_findings(incident):
    hw, cmd = incident
    code, d = check_json(hw, cmd)
    assert code == 1
    ids = {f["id"] for f in d["findings"]}
    assert {"host-oversubscribed", "host-check-blind", "hicache-prefix-only", "mla-replicated-kv"} <= ids
    assert d["verdict"] == "fail"
    assert d["engine"] == "sglang" and d["engine_version"] == "0.5.9"
    assert d["per_rank"]["kv_bytes_per_token"] == MLA_CELL == 70272
    assert abs(d["per_node"]["host_kv_bytes"] - 2.4e12) / 2.4e12 < 0.001
    assert d["per_node"]["ranks"] == 8
    assert d["per_node"]["host_available_bytes"] == 449 * 2**30
    for f in d["findings"]:
        assert f["message"] and f["fix"] and f["severity"] in ("error", "warning", "info")


def test_suggested_command_fits_the_node(incident):
    hw, cmd = incident
    _, d = check_json(hw, cmd)
    sug = d["suggested_command"]
    m = re.search(r"--hicache-size[ =](\d+(?:\.\d+)?)", sug)
    assert m, sug
    size_gb = float(m.group(1))
    # fits: 8 ranks × size GB <= 449 GiB - SGLang's 10 GiB reserve
    assert 8 * size_gb * 1e9 <= (449 - 10) * 2**30
    assert size_gb >= 40  # and is not uselessly small (the operator's working fix was 48)
    code, d2 = check_json(hw, sug.split())
    assert "host-oversubscribed" not in {f["id"] for f in d2["findings"]}
    assert code == 0


def test_incident_fix_48_passes(incident):
    hw, cmd = incident
    cmd[cmd.index("300")] = "48"
    code, d = check_json(hw, cmd)
    assert code == 0
    assert not [f for f in d["findings"] if f["severity"] == "error"]
    assert abs(d["per_node"]["host_kv_bytes"] - 8 * 48e9) / (8 * 48e9) < 0.001


def test_fraction_step_is_three_percent_of_baseline(incident):
    """0.85 -> 0.88 adds exactly what 3 % of the free-memory baseline P holds at 70,272 B/token."""
    hw, cmd = incident
    tokens = {}
    for mfs in ("0.85", "0.88"):
        c = list(cmd)
        c[c.index("0.93")] = mfs
        _, d = check_json(hw, c)
        tokens[mfs] = d["per_rank"]["kv_tokens"]
        p = d["per_rank"]["baseline_free_bytes"]
    expected = 0.03 * p / MLA_CELL
    assert abs((tokens["0.88"] - tokens["0.85"]) - expected) <= 1


def test_example_flag_runs_the_incident():
    code, out, _ = run_cli(["check", "--example"])
    assert code == 1
    assert "host-oversubscribed" in out and "2.40 TB" in out
