"""The JSON keys, options and exit codes scripts rely on (issue #2's contract)."""

from __future__ import annotations

import json

from kvplan import check, plan
from tests.conftest import INCIDENT_CMD, INCIDENT_HW, run_cli

KEYS = ["engine", "engine_version", "per_rank.kv_tokens", "per_rank.kv_bytes_per_token", "per_rank.kv_pool_gib",
        "per_rank.weights_gib", "per_rank.host_kv_bytes", "per_rank.host_kv_tokens", "per_rank.headroom_gib",
        "per_rank.max_running_requests", "per_node.ranks", "per_node.host_kv_bytes", "per_node.host_available_bytes",
        "per_replica.requests_fit", "per_replica.kv_tokens", "findings", "suggested_command", "verdict"]


def _get(d: dict, dotted: str):
    for part in dotted.split("."):
        d = d[part]
    return d


def test_json_keys_and_api_agree():
    code, out, _ = run_cli(["check", *INCIDENT_HW, "--json", "--", *INCIDENT_CMD])
    d = json.loads(out)
    for k in KEYS:
        _get(d, k)
    api = check(INCIDENT_CMD, gpu=INCIDENT_HW[1], host_mem_gib=449, engine_version="0.5.9").to_dict()
    assert api == d
    assert code == 1 and d["verdict"] == "fail"
    for f in d["findings"]:
        assert set(f) == {"id", "severity", "message", "fix"}


def test_plan_command_matches_check():
    code, out, _ = run_cli(["plan", "--model", "deepseek-ai/DeepSeek-V3", "--tp", "8", "--gpu", "h200",
                            "--mem-fraction-static", "0.85", "--hicache-size", "100", "--host-mem-gib", "2000",
                            "--engine-version", "0.5.23", "--json"])
    d = json.loads(out)
    assert code == 0
    c = check(["python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3", "--tp-size", "8",
               "--mem-fraction-static", "0.85", "--hicache-size", "100.0", "--enable-hierarchical-cache"],
              gpu="h200", host_mem_gib=2000, engine_version="0.5.23")
    assert d["per_rank"]["kv_tokens"] == c.plan.per_rank.kv_tokens
    assert d["per_node"]["host_kv_bytes"] == c.plan.per_node.host_kv_bytes
    r = plan("deepseek-ai/DeepSeek-V3", tp=8, extra_args=["--mem-fraction-static", "0.85"], gpu="h200",
             host_mem_gib=2000, engine_version="0.5.23")
    assert r.plan.per_rank.kv_bytes_per_token == 70272


def test_ok_exit_zero_and_human_output():
    code, out, err = run_cli(["check", "--gpu", "h100", "--host-mem-gib", "512", "--engine-version", "0.5.23", "--",
                              "python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"])
    assert code == 0, err
    assert "Per rank" in out and "Per node" in out and "Per replica" in out and "verdict" in out


def test_gpus_and_models_lists():
    code, out, _ = run_cli(["gpus"])  # piped, no COLUMNS: 80 wide, names wrapped by word
    assert code == 0 and "NVIDIA RTX PRO 6000 Blackwell" in out and "97,887" in out
    code, out, _ = run_cli(["models"])
    assert code == 0 and "moonshotai/Kimi-K2.5" in out
