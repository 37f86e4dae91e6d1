"""`kvplan simulate` / `kvplan tune` as a user runs them: JSON schema, human output, bad input exits 2."""

from __future__ import annotations

import json

import pytest

from kvplan.cli.main import main
from tests.diagnose.incident_log import CMD, write_incident_log

HW = ["--gpu", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "--host-mem-gib", "449", "--engine-version", "0.5.9"]
JOB = ["--requests", "400", "--prompt-len", "250", "--prompt-dist", "uniform:0.5", "--output-len", "3800",
       "--output-dist", "uniform:0.3", "--concurrency", "150"]


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return str(write_incident_log(tmp_path_factory.mktemp("cli") / "server.log"))


def test_simulate_json_schema(log, capsys):
    code = main(["simulate", *HW, *JOB, "--calibrate", log, "--json", "--", *CMD.split()])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["schema_version"] == 1
    assert {"launch", "workload", "step_model", "throughput", "latency", "load", "scheduler", "host_tier",
            "completed", "makespan_s", "series", "sim", "calibration"} <= set(d)
    assert set(d["throughput"]) == {"gen_tps", "prompt_tps", "steady_gen_tps"}
    for k in ("ttft_s", "tpot_s", "e2e_s", "queue_s"):
        assert {"mean", "p50", "p90", "p99", "max", "n"} <= set(d["latency"][k])
    assert d["completed"] == 400 and d["launch"]["kv_tokens_per_instance"] == 116_171
    assert d["calibration"]["observations"] == 30 and d["calibration"]["rows"]
    assert all({"t", "running", "queued", "kv_usage", "gen_tps"} <= set(p) for p in d["series"])


def test_simulate_human_output_with_series(log, capsys):
    code = main(["simulate", *HW, *JOB, "--calibrate", log, "--series", "--", *CMD.split()])
    out = capsys.readouterr().out
    assert code == 0
    for word in ("generation", "TTFT", "TPOT", "running / queued", "preempted / retracted", "fit residuals",
                 "over time"):
        assert word in out


def test_tune_json(log, capsys):
    code = main(["tune", *HW, "--requests", "300", "--prompt-len", "250", "--output-len", "3800",
                 "--concurrency", "150", "--calibrate", log, "--json", "--", *CMD.split()])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["current"]["name"] == "current"
    assert d["ranked"] and all(c["predicted"]["gen_tps"] > 0 for c in d["ranked"])
    assert all(c["command"] for c in d["ranked"])
    assert all(c["refused"] for c in d["refused"])


@pytest.mark.parametrize("argv,msg", [
    (["simulate", *HW, "--", *CMD.split()], "no workload"),
    (["simulate", *HW, *JOB], "after --"),
    (["simulate", *HW, "--requests", "10", "--prompt-len", "100", "--output-len", "10", "--", *CMD.split()],
     "--concurrency"),
    (["simulate", *HW, *JOB, "--output-dist", "zipf", "--", *CMD.split()], "distribution"),
    (["simulate", *HW, *JOB, "--workload", "/nonexistent.jsonl", "--", *CMD.split()], "either"),
    (["simulate", *HW, "--workload", "/nonexistent.jsonl", "--concurrency", "2", "--", *CMD.split()], "not found"),
    (["simulate", "--gpu", "no-such-gpu", *JOB, "--", *CMD.split()], "unknown GPU"),
    (["simulate", *HW, *JOB, "--mem-bw-gbps", "-1", "--", *CMD.split()], "> 0"),
])
def test_bad_input_exits_2_with_one_line(argv, msg, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_no_prior_without_gpu_figures_says_what_to_do(capsys):
    code = main(["simulate", "--gpu-mem-mib", "81920", "--host-mem-gib", "100", *JOB, "--",
                 *CMD.replace("--tp 8", "--tp 8").split()])
    err = capsys.readouterr().err
    assert code == 2 and "--calibrate" in err


def test_a_batch_outside_the_logs_steady_lines_is_flagged(log, capsys):
    # the incident log's Decode batch lines run 46-56 requests (tests/diagnose/incident_log.py); 2 clients run at
    # most 2, far below what the fit saw; 150 clients run ~55, inside it
    few = ["--requests", "20", "--prompt-len", "250", "--output-len", "400", "--concurrency", "2"]
    assert main(["simulate", *HW, *few, "--calibrate", log, "--json", "--", *CMD.split()]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("steady serving lines ran" in n and "extrapolation" in n for n in notes), notes
    assert main(["simulate", *HW, *JOB, "--calibrate", log, "--json", "--", *CMD.split()]) == 0
    assert not any("extrapolation" in n for n in json.loads(capsys.readouterr().out)["notes"])


def test_lockstep_workload_is_said_and_a_spread_one_is_not(capsys):
    base = ["simulate", "--gpu", "h100", "--requests", "40", "--prompt-len", "100", "--output-len", "500",
            "--concurrency", "8", "--json"]
    cmd = ["--", "vllm", "serve", "Qwen/Qwen3-8B"]
    assert main([*base, *cmd]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("lock-step" in n for n in notes), notes
    assert main([*base, "--output-dist", "uniform:0.5", *cmd]) == 0
    assert not any("lock-step" in n for n in json.loads(capsys.readouterr().out)["notes"])


def test_calibrate_without_a_workload_takes_the_logs(log, capsys):
    # the incident log alone: #token / #running ≈ 2,000 tokens in flight, prefill lines of 900-2,400 new tokens per
    # request, ~51 running + ~97 waiting -> the workload is inferred and said, and the run reproduces the log's batch
    code = main(["simulate", *HW, "--calibrate", log, "--json", "--", *CMD.split()])
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    note = next(n for n in d["notes"] if n.startswith("workload inferred from the log"))
    assert "clients" in note and d["workload"]["concurrency"] == pytest.approx(148, abs=3)
    assert 46 * 0.9 <= d["load"]["running_mean"] <= 56 * 1.1
