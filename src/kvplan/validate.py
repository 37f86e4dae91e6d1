"""One validation layer for every number kvplan takes from outside: CLI options, launch flags, environment values,
config.json fields, server answers.

A number is accepted only when it is finite, of the right kind (an integer where a count is meant; never a bool),
in range, and of a sane magnitude; anything else is a one-line :class:`KvplanError` that names the field and the
value. Callers pass the field name as the user wrote it (``--hicache-size``, ``LMCACHE_MAX_LOCAL_CPU_SIZE``,
``config.json num_hidden_layers``), so the message points at what to fix.

Limits that are not the engines' own are sanity bounds (no real launch comes near them), chosen so that no
arithmetic downstream can overflow a float, loop for minutes, or allocate without bound:

* sizes: ``0 <= bytes < 2**60`` (1 EiB);
* counts of tokens / context lengths: ``<= 2**31`` (SGLang and vLLM keep them in int32 tensors);
* ranks / GPUs / nodes: ``<= 65,536``; decoder layers ``<= 10,000``.
"""

from __future__ import annotations

import math
from typing import Any

from kvplan.errors import KvplanError

MAX_BYTES = 1 << 60  # exclusive
MAX_TOKENS = 1 << 31
MAX_RANKS = 1 << 16
MAX_LAYERS = 10_000
GiB = 1 << 30
GB = 10**9


def _range_text(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    def fmt(x: float) -> str:
        return f"{x:,}" if isinstance(x, int) else f"{x:g}"

    left = "(" if lo_open or lo is None else "["
    right = ")" if hi_open or hi is None else "]"
    return f"{left}{fmt(lo) if lo is not None else '-inf'}, {fmt(hi) if hi is not None else 'inf'}{right}"


def number(name: str, value: Any, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
           hi_open: bool = False, integer: bool = False, hint: str | None = None) -> float | int:
    """*value* as a finite float (or int when ``integer``) within [lo, hi] (open ends as asked); else KvplanError.

    Strings are parsed (``"8"``, ``"0.5"``, ``"1e3"``); an integer field accepts an integral float (``4096.0``)."""
    raw = value
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if integer and text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise KvplanError(f"{name} {raw!r} is not a number", hint) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KvplanError(f"{name} must be a number, got {type(raw).__name__} {_short(raw)}", hint)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise KvplanError(f"{name} {_short(raw)} is not a finite number", hint)
        if integer:
            if value != int(value):
                raise KvplanError(f"{name} {_short(raw)} must be a whole number", hint)
            value = int(value)
    bad = (lo is not None and (value <= lo if lo_open else value < lo)) or \
          (hi is not None and (value >= hi if hi_open else value > hi))
    if bad:
        raise KvplanError(f"{name} {_short(raw)} is out of range {_range_text(lo, hi, lo_open, hi_open)}", hint)
    return int(value) if isinstance(value, int) else float(value)


def optional(name: str, value: Any, **kw: Any) -> Any:
    """:func:`number` when *value* is not None."""
    return None if value is None else number(name, value, **kw)


def count(name: str, value: Any, lo: int = 1, hi: int = MAX_TOKENS, hint: str | None = None) -> int:
    """A whole number in [lo, hi]."""
    return int(number(name, value, lo=lo, hi=hi, integer=True, hint=hint))


def fraction(name: str, value: Any, hint: str | None = None) -> float:
    """A share of memory: 0 < value <= 1."""
    return float(number(name, value, lo=0.0, hi=1.0, lo_open=True, hint=hint))


def gib(name: str, value: Any, positive: bool = False, hint: str | None = None) -> float:
    """A size in GiB (2^30 bytes): >= 0 (> 0 when *positive*) and under 2^60 bytes."""
    return float(number(name, value, lo=0.0, lo_open=positive, hi=MAX_BYTES / GiB, hi_open=True, hint=hint))


def gb(name: str, value: Any, positive: bool = False, hint: str | None = None) -> float:
    """A size in decimal GB (10^9 bytes): >= 0 (> 0 when *positive*) and under 2^60 bytes."""
    return float(number(name, value, lo=0.0, lo_open=positive, hi=MAX_BYTES / GB, hi_open=True, hint=hint))


def size_bytes(name: str, value: Any, positive: bool = False, hint: str | None = None) -> int:
    """A byte count: a whole number >= 0 (> 0 when *positive*) and under 2^60."""
    return int(number(name, value, lo=0, lo_open=positive, hi=MAX_BYTES, hi_open=True, integer=True, hint=hint))


def seconds(name: str, value: Any, positive: bool = False, hi: float = 365 * 86400.0, hint: str | None = None
            ) -> float:
    """A duration: finite, >= 0 (> 0 when *positive*), at most a year."""
    return float(number(name, value, lo=0.0, lo_open=positive, hi=hi, hint=hint))


def _short(v: Any) -> str:
    s = repr(v) if not isinstance(v, (int, float)) or isinstance(v, bool) else f"{v}"
    return s if len(s) <= 40 else s[:37] + "..."


def plan_options(opts: dict[str, Any]) -> dict[str, Any]:
    """The options every front door passes to a plan (``PlanOptions`` fields), checked; returns them."""
    out = dict(opts)
    hint = "fix the option"
    checks = {
        "gpu_mem_mib": lambda v: count("--gpu-mem-mib", v, 1, (MAX_BYTES >> 20) - 1, hint),
        "gpus_per_node": lambda v: count("--gpus-per-node", v, 1, MAX_RANKS, hint),
        "nodes": lambda v: count("--nodes", v, 1, MAX_RANKS, hint),
        "host_mem_gib": lambda v: gib("--host-mem-gib", v, positive=True, hint=hint),
        "weights_gib": lambda v: gib("--weights-gib", v, hint=hint),
        "free_gib": lambda v: gib("--free-gib", v, hint=hint),
        "kv_memory_gib": lambda v: gib("--kv-memory-gib", v, hint=hint),
        "avg_tokens": lambda v: count("--avg-tokens", v, 1, MAX_TOKENS, hint),
        "shm_gib": lambda v: gib("--shm-gib", v, hint=hint),
        "container_mem_gib": lambda v: gib("--container-mem-gib", v, positive=True, hint=hint),
        "container_mem_request_gib": lambda v: gib("--container-mem-request-gib", v, positive=True, hint=hint),
        "gpus_requested": lambda v: count("--gpus-requested", v, 0, MAX_RANKS, hint),
    }
    for key, check in checks.items():
        if out.get(key) is not None:
            out[key] = check(out[key])
    if out.get("local_host") is not None and not isinstance(out["local_host"], bool):
        raise KvplanError(f"--local-host must be true or false, got {_short(out['local_host'])}")
    for key in ("gpu", "engine_version", "model_config", "shm_source", "container_mem_source",
                "container_mem_request_source"):
        v = out.get(key)
        if v is not None and not isinstance(v, str):
            raise KvplanError(f"--{key.replace('_', '-')} must be a string, got {_short(v)}")
    return out
