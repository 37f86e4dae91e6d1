"""The acceptance case: the incident's log (SGLang 0.5.9, Kimi-K2.5 TP8 on RTX PRO 6000, --mem-fraction-static
0.85, pool 116,171 tokens, ~850 tok/s with ~50 running and ~100 queued, token usage 0.85-0.96).

Facts pinned here come from the seeds and from arithmetic: 0.85 -> 0.88 adds 3 % of the free-memory baseline P
(the log's 'Load weight begin. avail mem=' = 93.48 GiB per rank) at 70,272 B/token: 0.03 × 93.48 GiB / 70,272 B =
42,851 tokens = +36.9 % of 116,171 ("about +38 %"); DP attention would hold 8 pools instead of one replicated
pool, but each rank then holds the whole attention block (about 11.3 GiB more bf16 weights per rank, worked out in
tests/weights/test_engine_weights.py::test_dp_attention_replicates_attention_by_hand) - more than the 7.6 GiB pool at
this fraction, so DP attention is priced at its own largest check-safe fraction; HiCache extends the prefix cache and
adds no concurrency. What is check-safe is asked of ``kvplan check`` itself (one rule for both commands).
"""

from __future__ import annotations

import argparse
import json

import pytest

from kvplan.cli.diagnose import add_parser, run
from kvplan.diagnose.run import diagnose
from tests.diagnose.incident_log import CMD, P_GIB, POOL, write_incident_log

HW = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "engine_version": "0.5.9", "host_mem_gib": 449.0}
CELL = (512 + 64) * 61 * 2


@pytest.fixture(scope="module", params=[",", "."], ids=["comma-0.5.x", "dot-older"])
def incident(request, tmp_path_factory):
    """One diagnosis per log format for the whole module (the tests only read it)."""
    log = write_incident_log(tmp_path_factory.mktemp("incident") / "sglang_inference.log", sep=request.param)
    return diagnose(log=str(log), **HW)


def test_bottleneck_is_kv_capacity_with_the_servers_numbers(incident):
    d = incident.to_dict()
    assert d["bottleneck"] == "kv-capacity"
    ev = " ".join(d["evidence"])
    assert "116,171" in ev and "0.85-0.96" in ev and "wait" in ev
    o = d["observed"]
    assert o["pool_tokens"] == POOL and o["pool_source"] == "the log"
    assert 46 <= o["running"] <= 56 and 94 <= o["queued"] <= 101 and 780 <= o["gen_tps"] <= 890


def test_fraction_step_is_about_38_percent(incident):
    cur, step = incident.lever("current"), incident.lever("fraction 0.88")
    assert cur.kv_tokens == POOL  # anchored on the server's own pool
    expected = 0.03 * P_GIB * 2**30 / CELL
    assert abs((step.kv_tokens - POOL) - expected) <= 2
    assert 35 <= step.kv_delta_pct <= 40
    assert "--mem-fraction-static 0.88" in step.command
    steps = [lv for lv in incident.levers if lv.name.startswith("fraction")]
    assert [lv.name for lv in steps] == ["fraction 0.88"]
    # the steps stop where check's gpu-headroom-low starts: 0.91 leaves too little outside the pool (check says so)
    assert any("0.91 and above: gpu-headroom-low" in n for n in incident.notes)
    assert "largest check-safe step" in " ".join(step.notes)
    assert "gpu-headroom-low" not in _check_ids(step.command)
    assert "gpu-headroom-low" in _check_ids(step.command.replace("0.88", "0.91"))


def _check_ids(command: str) -> dict[str, str]:
    from kvplan import check

    return {f.id: f.severity for f in check(command, **HW).findings}


def _fraction(command: str) -> float:
    args = command.split()
    return float(args[args.index("--mem-fraction-static") + 1])


def test_dp_attention_is_priced_at_its_largest_check_safe_fraction(incident):
    dp, step = incident.lever("DP attention"), incident.lever("fraction 0.88")
    assert dp is not None and "--enable-dp-attention" in dp.command and "--dp-size 8" in dp.command
    x = _fraction(dp.command)
    ids = _check_ids(dp.command)
    assert "gpu-headroom-low" not in ids and "error" not in ids.values()
    assert "gpu-headroom-low" in _check_ids(dp.command.replace(f"{x:.2f}", f"{x + 0.01:.2f}"))
    assert f"priced at --mem-fraction-static {x:.2f}" in dp.notes[0]
    # by hand: the pool at 0.85 is 116,171 × 70,272 B = 7.60 GiB, so the TP8 weights take 0.85 × P - 7.60 GiB;
    # with DP attention each of the 8 ranks holds +11.3 GiB of attention and its own pool at fraction x
    pool_gib = POOL * CELL / 2**30
    per_rank_gib = x * P_GIB - (0.85 * P_GIB - pool_gib) - 11.3
    assert dp.kv_tokens == pytest.approx(8 * per_rank_gib * 2**30 / CELL, rel=0.03)
    assert dp.kv_tokens > step.kv_tokens  # issue 12: DP attention the largest lever once priced where it is safe
    assert "attention weights are replicated per rank" in " ".join(dp.notes)


def test_hicache_adds_no_concurrency(incident):
    hc, cur = incident.lever("HiCache"), incident.lever("current")
    assert hc.requests == cur.requests and hc.kv_tokens == cur.kv_tokens
    assert hc.expected_gen_tps == pytest.approx(cur.expected_gen_tps)
    assert "--hicache-size" in hc.command and "prefix" in hc.notes[0]


def test_levers_have_the_json_contract(incident):
    d = json.loads(json.dumps(incident.to_dict()))
    assert d["levers"][0]["name"] == "current"
    for lv in d["levers"]:
        assert {"name", "kv_tokens", "requests", "expected_gen_tps", "command"} <= set(lv)
        assert lv["expected_gen_tps"] is not None and lv["command"]
    fp8 = next(lv for lv in d["levers"] if lv["name"] == "fp8 KV")
    assert fp8["kv_tokens"] == pytest.approx(2 * POOL, abs=2)  # same bytes, half the cell
    reps = next(lv for lv in d["levers"] if lv["name"] == "2 replicas")
    assert reps["replicas"] == 2 and reps["kv_tokens"] == POOL and reps["requests"] == 2 * d["levers"][0]["requests"]
    # TP8 twice on the 8 GPUs given: it says it needs 16, not a free gain
    assert reps["gpus_needed"] == 16 and "needs 16 GPUs" in reps["notes"][0] and "8 more GPU(s)" in reps["notes"][0]
    assert all(lv["gpus_needed"] is None for lv in d["levers"] if lv["name"] != "2 replicas")


def test_expected_throughput_scales_with_what_fits(incident):
    cur, step, dp = incident.lever("current"), incident.lever("fraction 0.88"), incident.lever("DP attention")
    assert cur.expected_gen_tps == pytest.approx(incident.observed["gen_tps"])
    # not linear in requests (issue #12): each decode step also reads the KV of every running request, so ~71
    # running make each step longer than the ~52 seen; the gain stays below the +36.9 % more that fit, and the
    # estimate says it is an extrapolation (the window saw at most 56 running)
    linear = cur.expected_gen_tps * step.kv_tokens / POOL
    assert 0.9 * linear < step.expected_gen_tps < linear
    assert "step time grows" in step.gen_tps_basis and "extrapolated" in step.gen_tps_basis
    assert dp.expected_gen_tps > step.expected_gen_tps  # more requests fit at its own check-safe fraction


def _cli(argv: list[str], command: list[str] | None, capsys) -> tuple[int, str]:
    ap = argparse.ArgumentParser(prog="kvplan")
    add_parser(ap.add_subparsers(dest="cmd"))
    code = run(ap.parse_args(argv), command)
    return code, capsys.readouterr().out


def test_cli_json_with_the_launch_command(tmp_path, capsys):
    log = write_incident_log(tmp_path / "x.log")
    hw = ["--gpu", HW["gpu"], "--engine-version", "0.5.9", "--host-mem-gib", "449"]
    code, out = _cli(["diagnose", "--log", str(log), "--json", *hw], CMD.split(), capsys)
    d = json.loads(out)
    assert code == 0 and d["bottleneck"] == "kv-capacity" and d["command_source"] == "--launch-command"
    step = next(lv for lv in d["levers"] if lv["name"] == "fraction 0.88")
    assert step["command"] == CMD.replace("0.85", "0.88")
    code, out = _cli(["diagnose", "--log", str(log), *hw, "--launch-command", CMD], None, capsys)
    assert code == 0 and "kv-capacity" in out and "DP attention" in out and "fixed launch commands" in out


def test_pasted_excerpt_without_startup_lines(tmp_path):
    from tests.diagnose.incident_log import incident_lines

    lines = [ln for ln in incident_lines() if "Decode batch" in ln]
    log = tmp_path / "excerpt.log"
    log.write_text("\n".join(lines) + "\n")
    res = diagnose(log=str(log))
    assert res.bottleneck == "kv-capacity" and res.levers == []
    assert any("launch is unknown" in n for n in res.notes)
    res = diagnose(log=str(log), launch_command=CMD, **HW)
    assert res.lever("DP attention") is not None and res.lever("current").kv_tokens > 0
    assert res.observed["pool_source"].startswith("estimated from the Decode lines")
    assert res.lever("current").kv_tokens == pytest.approx(POOL, rel=0.01)  # #token / token usage
