"""Which engine core a launch of vLLM 0.8.0-0.10.x really runs: V1 by default, V0 when the V1 oracle falls back.

From 0.8.0 ``VLLM_USE_V1`` defaults to "1", but ``EngineArgs._is_v1_supported_oracle`` sends a launch back to V0
(with the warning "... is not supported by the V1 Engine. Falling back to V0") when it asks for something V1 lacks;
only an explicit ``VLLM_USE_V1=1`` turns the fallback into an error (``_raise_or_fallback``). The conditions that
change memory planning, per release (engine/arg_utils.py, read in the 0.8.0, 0.8.2, 0.8.5, 0.9.2, 0.10.0, 0.10.1 and
0.10.2 wheels; https://github.com/vllm-project/vllm/blob/v0.8.5/vllm/engine/arg_utils.py,
https://github.com/vllm-project/vllm/blob/v0.10.1/vllm/engine/arg_utils.py):

- CUDA compute capability < 8.0 (T4, V100, RTX 20xx: "Need at least Ampere for now"): 0.8.0-0.10.1; gone in 0.10.2.
- ``--kv-cache-dtype`` other than auto: always in 0.8.0-0.8.1; from 0.8.2 V1 keeps fp8 only where FlashAttention
  supports fp8 (``flash_attn_supports_fp8``: FA3, Hopper, compute capability 9.x) and, from 0.8.5, on ROCm; 0.10.x
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


def v0_fallback(version: str, *, platform: str, cc: float | None, kv_cache_dtype: str, dtype: str,
                settings: Mapping[str, object] | None = None) -> str | None:
    """The feature that makes a default (V1) launch of ``version`` fall back to V0, or None.

    ``dtype`` is the resolved model dtype ("float32", "bfloat16", ...); ``settings`` the launch's values of the
    V0-only flags (``VLLMArgs`` fields of the same names; absent = default)."""
    v = Version(version)
    if not _within(v, "0.8.0", "0.11.0"):
        return None
    if platform == "cuda" and cc is not None and cc < 8.0 and v < Version("0.10.2"):
        return "Compute Capability < 8.0"
    kv = (kv_cache_dtype or "auto").lower()
    if kv != "auto" and v < Version("0.10.0"):
        if v < Version("0.8.2"):
            return "--kv-cache-dtype"
        fp8 = kv.startswith("fp8")
        supported = (platform == "rocm" and v >= Version("0.8.5")) or (
            fp8 and platform == "cuda" and cc is not None and 9.0 <= cc < 10.0)
        if not supported:
            return "--kv-cache-dtype"
    if dtype == "float32" and v < Version("0.9.0"):
        return "--dtype float32"
    got = settings or {}
    for name, since, until, default in _FLAG_FALLBACKS:
        if got.get(name, default) != default and _within(v, since, until):
            return "--" + name.replace("_", "-")
    return None
