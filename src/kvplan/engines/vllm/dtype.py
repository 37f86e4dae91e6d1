"""The dtype a vLLM launch computes in, which is also its KV dtype under ``--kv-cache-dtype auto``.

``--dtype auto`` takes the checkpoint's dtype (config.json ``dtype``, else ``torch_dtype``: transformers >= 4.56
parses both and keeps ``dtype``; ``models.config`` reads them in that order) and turns float32 into a 2-byte type,
per version:

- 0.6.x - 0.8.x (``config.py::_get_and_verify_dtype``, read in the 0.6.4.post1, 0.7.3 and 0.8.5 wheels):
  float32 -> float16 (Gemma-2 -> bfloat16 up to 0.7.x; PLaMo2 -> bfloat16 in 0.8.x); a bfloat16 model on a GPU
  below compute capability 8.0 stops the worker (``worker/worker.py::_check_if_gpu_supports_dtype``).
- 0.9.0: float32 -> float16, then anything ``current_platform.supported_dtypes`` lacks -> ``supported_dtypes[0]``
  (bfloat16 on CC < 8.0 falls back to float16 with a warning).
- >= 0.9.1 (``config.py::_resolve_auto_dtype``, read in the 0.9.1, 0.9.2, 0.10.2, 0.14.0, 0.32.0 and 0.33.0
  wheels; ``config/model.py`` from 0.11): float32 -> ``supported_dtypes[0]`` minus float16 for the models in
  ``_FLOAT16_NOT_SUPPORTED_MODELS``: bfloat16 on CUDA CC >= 8.0, ROCm and x86/ARM CPU; float16 on CC 6.x-7.x,
  and float32 itself for those models there.

``platforms/cuda.py::supported_dtypes``: [bf16, fp16, fp32] from CC 8.0, [fp16, fp32] from 6.0, [fp32] below;
ROCm and CPU (x86, aarch64): [bf16, fp16, fp32]
(https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/config/__init__.py ``_resolve_auto_dtype``,
https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/platforms/cuda.py ``CudaPlatformBase.supported_dtypes``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from kvplan.engines.versions import Version
from kvplan.errors import KvplanError

BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# vllm/utils.py::STR_DTYPE_TO_TORCH_DTYPE names for --dtype (config.py::_STR_DTYPE_TO_TORCH_DTYPE)
FLAG_NAMES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32",
              "float32": "float32"}
CONFIG_NAMES = {"float32": "float32", "float": "float32", "fp32": "float32", "float16": "float16",
                "half": "float16", "fp16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16"}
# _FLOAT16_NOT_SUPPORTED_MODELS by the first version read with that set: 0.9.1/0.9.2 wheels; 0.10.2 .. 0.14.0
# wheels add gemma3_text; plamo2 is gone in the 0.27.0 wheel (present in 0.21.0, per the reference notes 8.1)
NO_FP16_MODELS: tuple[tuple[str, frozenset[str]], ...] = (
    ("0.9.1", frozenset({"gemma2", "gemma3", "plamo2", "glm4"})),
    ("0.10.2", frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})),
    ("0.27.0", frozenset({"gemma2", "gemma3", "gemma3_text", "glm4"})),
)


def no_fp16_models(v: Version) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for since, models in NO_FP16_MODELS:
        if v >= Version(since):
            out = models
    return out

# Uncatalogued NVIDIA names below compute capability 8.0 (https://developer.nvidia.com/cuda-gpus); catalogued GPUs
# take ``compute_capability`` from the GPU catalog, any other NVIDIA name is assumed 8.0.
_PRE_AMPERE: tuple[tuple[str, float], ...] = (
    (r"\bT4\b", 7.5), (r"RTX 20\d\d", 7.5), (r"GTX 16\d\d", 7.5), (r"Quadro RTX", 7.5), (r"TITAN RTX", 7.5),
    (r"V100", 7.0), (r"TITAN V\b", 7.0), (r"P100", 6.0), (r"\bP40\b", 6.1), (r"\bP4\b", 6.1),
    (r"GTX 10\d\d", 6.1), (r"\bK80\b", 3.7), (r"\bM40\b", 5.2), (r"\bM60\b", 5.2),
)


@lru_cache(maxsize=256)
def platform_of(gpu_name: str, is_cpu: bool) -> tuple[str, float | None]:
    """("cuda" | "rocm" | "cpu", compute capability for CUDA or None): the GPU catalog's ``compute_capability``
    (what ``current_platform.get_device_capability()`` returns on that part), else by name."""
    if is_cpu:
        return "cpu", None
    from kvplan.hardware.gpus import find_gpu

    name = gpu_name or ""
    gpu = find_gpu(name)
    if gpu is not None and gpu.platform == "rocm":
        return "rocm", None
    if gpu is not None and gpu.cc is not None:
        return "cuda", gpu.cc
    if re.search(r"\bAMD\b|Instinct|Radeon|\bMI\d{3}", name, re.I):
        return "rocm", None
    for pat, cc in _PRE_AMPERE:
        if re.search(pat, name, re.I):
            return "cuda", cc
    return "cuda", 8.0


def supported_dtypes(platform: str, cc: float | None) -> list[str]:
    """current_platform.supported_dtypes, first = preferred."""
    if platform != "cuda" or cc is None or cc >= 8.0:
        return ["bfloat16", "float16", "float32"]
    if cc >= 6.0:
        return ["float16", "float32"]
    return ["float32"]


@dataclass(frozen=True)
class ModelDtype:
    name: str  # "bfloat16" | "float16" | "float32": what the weights and activations are held in
    reason: str

    @property
    def bytes(self) -> int:
        return BYTES[self.name]


@lru_cache(maxsize=1024)
def resolve_dtype(version: str, flag: str | None, config_dtype: str | None, model_type: str,
                  platform: str = "cuda", cc: float | None = 8.0) -> ModelDtype:
    """The dtype vLLM ``version`` runs a checkpoint in (see the module docstring for the per-version rules).

    ``config_dtype`` is what config.json declares (None: vLLM reads the safetensors metadata from 0.10.2, else
    takes float32; kvplan has no tensors, so None is treated as float32, which "auto" turns into a 2-byte type).
    Raises KvplanError where the engine refuses to start."""
    v = Version(version)
    cfg = CONFIG_NAMES.get(str(config_dtype or "float32").lower().replace("torch.", ""), "float32")
    where = f"vLLM {version} on {platform.upper()}" + (f" (compute capability {cc:.1f})" if cc else "")
    flag_l = (flag or "auto").lower()
    if flag_l != "auto":
        if flag_l not in FLAG_NAMES:
            raise KvplanError(f"--dtype {flag!r} is not a dtype vLLM accepts",
                              "use auto, half, float16, bfloat16, float or float32")
        out = ModelDtype(FLAG_NAMES[flag_l], f"--dtype {flag}")
    elif v < Version("0.9.0"):
        if cfg == "float32":
            bf16 = (model_type == "gemma2" and v < Version("0.8.0")) or model_type == "plamo2"
            out = ModelDtype("bfloat16" if bf16 else "float16", "auto: float32 checkpoint downcast")
        else:
            out = ModelDtype("bfloat16" if model_type == "plamo2" else cfg, "auto: checkpoint dtype")
    else:
        sup = supported_dtypes(platform, cc)
        if v >= Version("0.9.1"):
            sup = [d for d in sup if not (model_type in no_fp16_models(v) and d == "float16")]
            preferred = sup[0]
            want = preferred if cfg == "float32" else cfg
        else:
            preferred = sup[0]  # 0.9.0: float16 for float32 (bfloat16 for PLaMo2), then the platform fallback
            want = "bfloat16" if model_type == "plamo2" else "float16" if cfg == "float32" else cfg
        if want in sup:
            out = ModelDtype(want, "auto: float32 checkpoint downcast" if cfg == "float32" and want != cfg
                             else "auto: checkpoint dtype")
        else:
            out = ModelDtype(preferred, f"auto: {want} unsupported on this device, falls back")
    if out.name == "bfloat16" and platform == "cuda" and cc is not None and cc < 8.0 and (
            flag_l != "auto" or v < Version("0.9.0")):
        raise KvplanError(f"{where} refuses bfloat16: 'Bfloat16 is only supported on GPUs with compute "
                          "capability of at least 8.0'", "add --dtype half")
    if out.name == "float16" and model_type in no_fp16_models(v):
        raise KvplanError(f"{where}: 'The model type {model_type!r} does not support float16'",
                          "use --dtype bfloat16 (CC >= 8.0) or --dtype float32")
    return ModelDtype(out.name, f"{out.reason} ({where}; checkpoint {cfg})")
