"""``--dtype auto`` per vLLM version and platform (issue #10, cause 3).

Expected values are read from the released engine code, cited per case:
- 0.6.4.post1 / 0.7.3 ``vllm/config.py::_get_and_verify_dtype``: float32 -> float16, Gemma-2 -> bfloat16;
- 0.8.5 same function: float32 -> float16, PLaMo2 -> bfloat16, no Gemma-2 special case any more;
- 0.10.2 ``config/__init__.py::_resolve_auto_dtype`` and 0.32.0 ``config/model.py::_resolve_auto_dtype``:
  float32 -> ``current_platform.supported_dtypes[0]`` (fp16 removed for gemma2/gemma3/glm4);
  ``platforms/cuda.py``: [bf16, fp16, fp32] on CC >= 8.0, [fp16, fp32] on CC 6.x/7.x, [fp32] below.
- V0 ``worker/worker.py::_check_if_gpu_supports_dtype``: bfloat16 below CC 8.0 stops the worker.
"""

from __future__ import annotations

import json

import pytest

from kvplan import check
from kvplan.engines.vllm.dtype import platform_of, resolve_dtype
from kvplan.errors import KvplanError
from kvplan.models.config import spec_from_config


@pytest.mark.parametrize("version, flag, cfg, model_type, platform, cc, want", [
    ("0.6.4", "auto", "float32", "llama", "cuda", 8.0, "float16"),
    ("0.6.4", "auto", "float32", "gemma2", "cuda", 8.0, "bfloat16"),
    ("0.7.3", "auto", "bfloat16", "llama", "cuda", 9.0, "bfloat16"),
    ("0.8.5", "auto", "float32", "gemma2", "cuda", 8.0, "float16"),
    ("0.8.5", "auto", "float16", "plamo2", "cuda", 8.0, "bfloat16"),
    ("0.9.0", "auto", "bfloat16", "llama", "cuda", 7.5, "float16"),  # falls back with a warning
    ("0.10.2", "auto", "float32", "llama", "cuda", 8.0, "bfloat16"),
    ("0.10.2", "auto", "float32", "llama", "cuda", 7.0, "float16"),
    ("0.10.2", "auto", "float32", "gemma2", "cuda", 7.5, "float32"),  # only fp32 is left for Gemma-2 on a T4
    ("0.32.0", "auto", "float32", "llama", "cpu", None, "bfloat16"),
    ("0.32.0", "auto", "float32", "llama", "rocm", None, "bfloat16"),
    ("0.32.0", "auto", "float16", "llama", "cuda", 9.0, "float16"),
    ("0.32.0", "float", "bfloat16", "llama", "cpu", None, "float32"),
    ("0.32.0", "half", "float32", "llama", "cuda", 9.0, "float16"),
    ("0.32.0", "auto", None, "llama", "cuda", 9.0, "bfloat16"),  # no key: float32 fallback, then auto
])
def test_resolve(version, flag, cfg, model_type, platform, cc, want):
    got = resolve_dtype(version, flag, cfg, model_type, platform, cc)
    assert got.name == want
    assert got.bytes == {"float32": 4, "float16": 2, "bfloat16": 2}[want]


@pytest.mark.parametrize("version, flag, cfg, model_type, cc", [
    ("0.7.3", "auto", "bfloat16", "llama", 7.5),  # V0 worker: Bfloat16 is only supported on CC >= 8.0
    ("0.32.0", "bfloat16", "float32", "llama", 7.0),  # explicit bf16 on a V100
    ("0.32.0", "half", "bfloat16", "gemma3_text", 9.0),  # _check_valid_dtype
    ("0.32.0", "int8", "bfloat16", "llama", 9.0),  # not a dtype vLLM accepts
])
def test_engine_refuses(version, flag, cfg, model_type, cc):
    with pytest.raises(KvplanError):
        resolve_dtype(version, flag, cfg, model_type, "cuda", cc)


@pytest.mark.parametrize("name, want", [  # https://developer.nvidia.com/cuda-gpus
    ("Tesla T4", ("cuda", 7.5)), ("Tesla V100-SXM2-32GB", ("cuda", 7.0)), ("NVIDIA H100 80GB HBM3", ("cuda", 9.0)),
    ("h100", ("cuda", 9.0)), ("NVIDIA L4", ("cuda", 8.9)), ("NVIDIA B200", ("cuda", 10.0)),
    ("NVIDIA GeForce RTX 4090", ("cuda", 8.9)), ("NVIDIA GeForce RTX 5090", ("cuda", 12.0)),
    ("AMD Instinct MI300X", ("rocm", None)),
    ("Tesla P100-PCIE-16GB", ("cuda", 6.0)), ("NVIDIA Imaginary X1", ("cuda", 8.0)),  # uncatalogued: by name
])
def test_platform_of(name, want):
    assert platform_of(name, False) == want


def _cfg(**dtype_keys):
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
           "intermediate_size": 14336, "max_position_embeddings": 8192}
    cfg.update(dtype_keys)
    return cfg


def test_config_reads_dtype_key_first():
    """transformers >= 4.56 writes "dtype"; when both keys are there it keeps "dtype"."""
    assert spec_from_config(_cfg(dtype="float32")).dtype == "float32"
    assert spec_from_config(_cfg(torch_dtype="float16")).dtype == "float16"
    assert spec_from_config(_cfg(dtype="bfloat16", torch_dtype="float32")).dtype == "bfloat16"


@pytest.mark.parametrize("key", ["dtype", "torch_dtype"])
def test_float32_checkpoint_plans_two_byte_kv(tmp_path, key):
    """A float32 Llama-3-8B-shaped checkpoint on an H100 with vLLM 0.11: --dtype auto runs it in bfloat16, so a
    KV token costs 32 layers x 8 heads x 128 x 2 (K, V) x 2 B = 131,072 B; --dtype float32 doubles it."""
    (tmp_path / "config.json").write_text(json.dumps(_cfg(**{key: "float32"})))
    cmd = ["vllm", "serve", str(tmp_path), "--kv-cache-memory-bytes", "8G"]
    auto = check(cmd, gpu="h100", engine_version="0.11.0", host_mem_gib=512).plan
    assert auto.per_rank.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2
    assert auto.settings.model_dtype == "bfloat16"
    assert auto.per_rank.kv_blocks == 8 * 2**30 // (16 * 131072)
    f32 = check([*cmd, "--dtype", "float32"], gpu="h100", engine_version="0.11.0", host_mem_gib=512).plan
    assert f32.per_rank.kv_bytes_per_token == 2 * 131072
    old = check(cmd, gpu="t4", engine_version="0.6.4", host_mem_gib=512).plan  # V0: float32 -> float16
    assert old.settings.model_dtype == "float16" and old.per_rank.kv_bytes_per_token == 131072
