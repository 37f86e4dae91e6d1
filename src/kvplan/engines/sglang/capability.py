"""What SGLang gates on the GPU's device capability (``torch.cuda.get_device_capability()``), from the GPU catalog
(``hardware.gpus.GPU.device_capability``: the compute capability on NVIDIA, the gfx target's (major, minor) on AMD).

- Quantized checkpoints: ``model_loader/loader.py::_get_quantization_config`` raises "The quantization method ...
  is not supported for the current GPU. Minimum capability: N" when ``major * 10 + minor`` is below the method's
  ``get_min_capability()`` (not on NPU). ModelOpt NVFP4 (``ModelOptFp4Config``): 100, so Blackwell only; read in
  the 0.5.9 wheel (https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/model_loader/loader.py,
  https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/layers/quantization/modelopt_quant.py).
- Shared-expert fusion (``weights._fused_shared``).
"""

from __future__ import annotations

from kvplan.engines.versions import Version
from kvplan.errors import KvplanError
from kvplan.models.spec import ModelSpec

# (quantization format of kvplan's QuantScheme, SGLang's method name, get_min_capability(), first wheel read)
MIN_CAPABILITY: tuple[tuple[str, str, int, str], ...] = (
    ("nvfp4_mo", "modelopt_fp4", 100, "0.5.9"),
)


def device_capability(gpu_name: str | None) -> tuple[int, int] | None:
    """What torch reports for this GPU, from the catalog (None: not catalogued)."""
    from kvplan.hardware.gpus import find_gpu

    g = find_gpu(gpu_name)
    return g.device_capability if g is not None else None


def quant_refusal(model: ModelSpec, gpu_name: str | None, version: str) -> str | None:
    """Why SGLang ``version`` refuses to load this checkpoint on this CUDA GPU (None: it loads it, or unknown)."""
    from kvplan.models.postload import platform_of
    from kvplan.models.quantfmt import scheme_from_config
    from kvplan.models.synth_parts import quant_config_of

    cap = device_capability(gpu_name)
    q = quant_config_of(dict(model.config or {}))
    if cap is None or not q or platform_of(gpu_name) != "cuda":
        return None
    try:
        fmt = scheme_from_config(q, model.dtype).default.method
    except KvplanError:
        return None
    for method, name, need, since in MIN_CAPABILITY:
        have = cap[0] * 10 + cap[1]
        if fmt == method and have < need and Version(version) >= Version(since):
            return (f"SGLang {version} refuses this checkpoint on the {gpu_name}: '{name} is not supported for the "
                    f"current GPU. Minimum capability: {need}. Current capability: {have}.' "
                    "(model_loader/loader.py::_get_quantization_config); the weights below are what it would hold")
    return None
