"""The GPU's HBM bandwidth and dense FLOP/s, from the catalog (``hardware.gpus.gpu_perf``) or the command line.

``gpu_perf(name_or_alias) -> GpuPerf(mem_bw_gbps, bf16_dense_tflops, fp8_dense_tflops, source)`` lives with the GPU
catalog; a GPU without those figures (or a CPU launch) has no roofline prior, and the step model then needs
``--calibrate`` or ``--mem-bw-gbps`` / ``--tflops``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePerf:
    mem_bw_gbps: float | None
    dense_tflops: float | None  # of the compute dtype the model runs in
    source: str


def device_perf(gpu_name: str | None, fp8_compute: bool, mem_bw_gbps: float | None = None,
                tflops: float | None = None) -> DevicePerf:
    """Figures for the roofline: the command line's, else the catalog's, else none."""
    bw, fl, src = mem_bw_gbps, tflops, "--mem-bw-gbps/--tflops"
    if (bw is None or fl is None) and gpu_name:
        cat = _catalog_perf(gpu_name)
        if cat is not None:
            cbw = getattr(cat, "mem_bw_gbps", None)
            cfl = getattr(cat, "fp8_dense_tflops", None) if fp8_compute else None
            cfl = cfl or getattr(cat, "bf16_dense_tflops", None)
            bw, fl = bw or cbw, fl or cfl
            src = f"GPU catalog: {getattr(cat, 'source', '') or gpu_name}" if (mem_bw_gbps is None and tflops is None) \
                else f"{src} + GPU catalog"
    if bw is None or fl is None:
        return DevicePerf(bw, fl, f"no bandwidth/FLOP figures for {gpu_name or 'this device'}")
    return DevicePerf(float(bw), float(fl), src)


def _catalog_perf(name: str):
    try:
        from kvplan.hardware import gpus
    except ImportError:  # pragma: no cover
        return None
    fn = getattr(gpus, "gpu_perf", None)
    if fn is None:
        return None
    try:
        return fn(name)
    except Exception:  # noqa: BLE001 - unknown GPU or no figures: no prior
        return None
