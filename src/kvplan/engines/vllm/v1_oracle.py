"""Which engine core a launch of vLLM 0.8.0-0.10.x really runs: V1 by default, V0 when the V1 oracle falls back.

From 0.8.0 ``VLLM_USE_V1`` defaults to "1", but ``EngineArgs._is_v1_supported_oracle`` sends a launch back to V0
(with the warning "... is not supported by the V1 Engine. Falling back to V0") when it asks for something V1 lacks;
only an explicit ``VLLM_USE_V1=1`` turns the fallback into an error (``_raise_or_fallback``). The conditions that
change memory planning, per release (engine/arg_utils.py, read in the 0.8.0, 0.8.2, 0.8.5, 0.9.2, 0.10.0, 0.10.1 and
0.10.2 wheels; https://github.com/vllm-project/vllm/blob/v0.8.5/vllm/engine/arg_utils.py,
https://github.com/vllm-project/vllm/blob/v0.10.1/vllm/engine/arg_utils.py):

- CUDA compute capability < 8.0 (T4, V100, RTX 20xx: "Need at least Ampere for now"): 0.8.0-0.10.1; gone in 0.10.2.
- ``--kv-cache-dtype`` other than auto: always in 0.8.0-0.8.1; from 0.8.2 V1 keeps fp8 only where FlashAttention
  will run it (``will_use_fa``: CUDA with ``VLLM_ATTENTION_BACKEND`` unset, or set to FLASH_ATTN_VLLM_V1) and
  supports fp8 (``attention/utils/fa_utils.py::flash_attn_supports_fp8``: ``get_flash_attn_version() == 3`` and
  capability major 9; FA3 is the default on major 9 unless ``VLLM_FLASH_ATTN_VERSION=2``); from 0.9.0 also on ROCm
  (the ``current_platform.is_rocm()`` branch is absent from the 0.8.2 and 0.8.5 wheels, present in 0.9.0 and 0.9.2:
  https://github.com/vllm-project/vllm/blob/v0.9.2/vllm/engine/arg_utils.py,
  https://github.com/vllm-project/vllm/blob/v0.9.2/vllm/attention/utils/fa_utils.py). So an H100 (9.0) keeps V1
  with fp8 KV, an A100 (8.0), L4 (8.9) or B200 (10.0) falls back. The capability is the GPU catalog's. 0.10.x
  asks the platform (``is_kv_cache_dtype_supported``: fp8 on CUDA supported), so no fallback there.
- ``--dtype`` float32 (V1 supported only fp16/bf16): 0.8.0-0.8.5.
- ``--preemption-mode``, ``--scheduler-delay-factor``, ``--disable-async-output-proc`` (all 0.8.0-0.10.x),
  ``--num-scheduler-steps`` (0.8.0-0.10.0), ``--scheduling-policy`` (0.8.0-0.8.5), ``--cpu-offload-gb``
  (0.8.0-0.8.1), ``--enable-prompt-adapter`` (0.8.0-0.9.x).
"""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.engines.versions import Version

# (flag, since, until, the value that keeps V1): a V0-only setting away from its default sends the launch to V0
_FLAG_FALLBACKS: tuple[tuple[str, str, str, object], ...] = (
    ("preemption_mode", "0.8.0", "0.11.0", None),
    ("scheduler_delay_factor", "0.8.0", "0.11.0", 0.0),
    ("disable_async_output_proc", "0.8.0", "0.11.0", False),
    ("num_scheduler_steps", "0.8.0", "0.10.1", 1),
    ("scheduling_policy", "0.8.0", "0.9.0", "fcfs"),
    ("cpu_offload_gb", "0.8.0", "0.8.2", 0.0),
    ("enable_prompt_adapter", "0.8.0", "0.10.0", False),
)

V0_ONLY_SETTINGS = tuple(f[0] for f in _FLAG_FALLBACKS)


def _within(v: Version, since: str, until: str) -> bool:
    return Version(since) <= v < Version(until)


def _fa_supports_fp8(cc: float | None, env: Mapping[str, str]) -> bool:
    """``flash_attn_supports_fp8`` on CUDA: FlashAttention 3 (``get_flash_attn_version``: 3 on major 9 unless
    ``VLLM_FLASH_ATTN_VERSION`` says 2) and capability major 9 (0.8.5-0.9.2 ``attention/utils/fa_utils.py``)."""
    if cc is None or int(cc) != 9:
        return False
    return (env.get("VLLM_FLASH_ATTN_VERSION") or "3").strip() != "2"


def v0_fallback(version: str, *, platform: str, cc: float | None, kv_cache_dtype: str, dtype: str,
                settings: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The feature that makes a default (V1) launch of ``version`` fall back to V0, or None.

    ``dtype`` is the resolved model dtype ("float32", "bfloat16", ...); ``settings`` the launch's values of the
    V0-only flags (``VLLMArgs`` fields of the same names; absent = default); ``env`` the launch's environment."""
    v = Version(version)
    if not _within(v, "0.8.0", "0.11.0"):
        return None
    if platform == "cuda" and cc is not None and cc < 8.0 and v < Version("0.10.2"):
        return "Compute Capability < 8.0"
    kv = (kv_cache_dtype or "auto").lower()
    if kv != "auto" and v < Version("0.10.0"):
        if v < Version("0.8.2"):
            return "--kv-cache-dtype"
        e = env or {}
        backend = e.get("VLLM_ATTENTION_BACKEND")
        will_use_fa = (platform == "cuda" and backend is None) or backend == "FLASH_ATTN_VLLM_V1"
        if platform == "rocm" and v >= Version("0.9.0"):
            supported = True
        else:
            supported = kv.startswith("fp8") and will_use_fa and _fa_supports_fp8(cc, e)
        if not supported:
            return "--kv-cache-dtype"
    if dtype == "float32" and v < Version("0.9.0"):
        return "--dtype float32"
    got = settings or {}
    for name, since, until, default in _FLAG_FALLBACKS:
        if got.get(name, default) != default and _within(v, since, until):
            return "--" + name.replace("_", "-")
    return None
