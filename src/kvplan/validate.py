"""One validation layer for every number, string and nested value kvplan takes from outside: CLI options, launch
flags, environment values, config.json fields, deployment files, workload files, HTTP bodies, server answers, the
Python API.

A number is accepted only when it is finite, of the right kind (an integer where a count is meant; never a bool),
in range, and of a sane magnitude; anything else is a one-line :class:`KvplanError` that names the field and the
value. Callers pass the field name as the user wrote it (``--hicache-size``, ``LMCACHE_MAX_LOCAL_CPU_SIZE``,
``config.json num_hidden_layers``), so the message points at what to fix.

Limits that are not the engines' own are sanity bounds (no real launch comes near them), chosen so that no
arithmetic downstream can overflow a float, loop for minutes, or allocate without bound:

* sizes: ``0 <= bytes < 2**60`` (1 EiB);
* counts of tokens / context lengths: ``<= 2**31`` (SGLang and vLLM keep them in int32 tensors);
* ranks / GPUs / nodes: ``<= 65,536``; decoder layers ``<= 10,000``;
* a number written as text: at most ``MAX_NUMBER_CHARS`` characters (CPython refuses ``int()`` of 4,300+ digits);
* strings: at most ``MAX_TEXT`` characters unless the caller says otherwise (one argument or environment value of a
  launch: ``MAX_ARG``, what execve takes); paths: ``PATH_MAX`` bytes in all,
  ``NAME_MAX`` bytes a component, no NUL (an over-long path is a one-line error, never ``ENAMETOOLONG``);
* JSON: nested at most ``MAX_DEPTH`` levels (checked without recursion), integers of at most ``MAX_NUMBER_CHARS``
  digits.
"""

from __future__ import annotations

import math
from typing import Any

from kvplan.errors import KvplanError

MAX_BYTES = 1 << 60  # exclusive
MAX_TOKENS = 1 << 31
MAX_RANKS = 1 << 16
MAX_LAYERS = 10_000
MAX_NUMBER_CHARS = 64
MAX_TEXT = 4096
MAX_ARG = 32 * 4096  # Linux MAX_ARG_STRLEN: one argument or environment string execve takes (binfmts.h)
MAX_COMMAND = 2 * 2**20  # a launch command given as one string (Linux ARG_MAX is 2 MiB with an 8 MiB stack)
MAX_COMMAND_WORDS = 20_000  # words of a launch command (a real one has a few hundred)
MAX_IMAGE = 1024  # a container image reference (registry host + 255-byte repository + 128-byte tag + digest)
PATH_MAX = 4096
NAME_MAX = 255
MAX_DEPTH = 64
GiB = 1 << 30
GB = 10**9


class BoundExceeded(KvplanError):
    """Well-formed input past one of the sanity bounds (nesting depth, digits): not a matter of syntax."""


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
        if len(text) > MAX_NUMBER_CHARS:
            raise KvplanError(f"{name} {_short(raw)} ({len(text):,} characters) is too long to be a number", hint)
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
    for key in ("gpu", "engine_version", "shm_source", "container_mem_source", "container_mem_request_source"):
        if out.get(key) is not None:
            out[key] = text(f"--{key.replace('_', '-')}", out[key], max_len=1024)
    if out.get("model_config") is not None:
        out["model_config"] = path("--model-config", out["model_config"], hint="pass config.json or a checkpoint "
                                   "folder")
    return out


def text(name: str, value: Any, *, max_len: int = MAX_TEXT, hint: str | None = None, scalar: bool = False) -> str:
    """A string of at most *max_len* characters without NUL; with *scalar*, a number or bool (a YAML scalar) is taken
    as its text. Anything else (a list, a map, None) is a one-line KvplanError naming the field."""
    if scalar and isinstance(value, bool):
        value = "true" if value else "false"
    elif scalar and isinstance(value, int) and value.bit_length() > 4 * MAX_NUMBER_CHARS:
        raise KvplanError(f"{name} is a number of {value.bit_length():,} bits; no field takes one", hint)
    elif scalar and isinstance(value, (int, float)):
        value = str(value)
    if not isinstance(value, str):
        raise KvplanError(f"{name} must be {'a string' if not scalar else 'a string or a number'}, got "
                          f"{_kind(value)}", hint)
    if len(value) > max_len:
        raise KvplanError(f"{name} is {len(value):,} characters long (at most {max_len:,}): {_short(value)}", hint)
    if "\0" in value:
        raise KvplanError(f"{name} holds a NUL character: {_short(value)}", hint)
    return value


def optional_text(name: str, value: Any, **kw: Any) -> str | None:
    """:func:`text` when *value* is not None."""
    return None if value is None else text(name, value, **kw)


def path(name: str, value: Any, hint: str | None = None) -> str:
    """A file-system path as given (``~`` not expanded): a string of at most PATH_MAX bytes whose components are at
    most NAME_MAX bytes each (what ``open`` would refuse with ENAMETOOLONG), without NUL."""
    p = text(name, value, max_len=PATH_MAX, hint=hint)
    raw = p.encode("utf-8", "surrogateescape")
    if len(raw) >= PATH_MAX:
        raise KvplanError(f"{name} is {len(raw):,} bytes long, longer than a path can be ({PATH_MAX:,}): "
                          f"{_short(p)}", hint)
    longest = max((len(c) for c in raw.split(b"/")), default=0)
    if longest > NAME_MAX:
        raise KvplanError(f"{name} has a component of {longest:,} bytes, longer than a file name can be "
                          f"({NAME_MAX}): {_short(p)}", hint)
    return p


def _kind(v: Any) -> str:
    if v is None:
        return "nothing (null)"
    if isinstance(v, dict):
        return f"a map of {len(v):,} key{'s' if len(v) != 1 else ''}"
    if isinstance(v, (list, tuple)):
        return f"a list of {len(v):,} item{'s' if len(v) != 1 else ''}"
    return f"{type(v).__name__} {_short(v)}"


def depth(name: str, value: Any, max_depth: int = MAX_DEPTH, hint: str | None = None) -> Any:
    """*value* (lists / dicts of anything) when it nests at most *max_depth* levels; checked iteratively, so a deep
    value is an error here and never a RecursionError elsewhere. Shared sub-values are walked once."""
    stack = [(value, 1)]
    seen: set[int] = set()
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            if d > max_depth:
                raise BoundExceeded(f"{name} is nested more than {max_depth} levels deep", hint)
            if id(v) in seen:
                continue
            seen.add(id(v))
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return value


class _LongNumber(ValueError):
    pass


def _json_int(s: str) -> int:
    if len(s) > MAX_NUMBER_CHARS:
        raise _LongNumber(s)
    return int(s)


def json_value(data: str | bytes, what: str, *, max_depth: int = MAX_DEPTH, hint: str | None = None) -> Any:
    """Parse JSON text from outside (a file, an HTTP body, a server answer) with bounds: at most *max_depth* levels,
    integers of at most MAX_NUMBER_CHARS digits; one-line KvplanError naming *what* otherwise."""
    import json

    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        value = json.loads(data, parse_int=_json_int)
    except _LongNumber as e:
        raise BoundExceeded(f"{what}: a number of {len(str(e)):,} digits ({_short(str(e))}); no field takes one",
                            hint) from None
    except RecursionError:
        raise BoundExceeded(f"{what}: JSON nested more than {max_depth} levels deep", hint) from None
    except UnicodeDecodeError as e:
        raise KvplanError(f"{what}: not UTF-8 text ({e.reason})", hint) from None
    except json.JSONDecodeError as e:
        raise KvplanError(f"{what}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}", hint) from None
    except ValueError as e:
        raise KvplanError(f"{what}: not valid JSON ({_short(str(e))})", hint) from None
    return depth(what, value, max_depth, hint)


def mapping(name: str, value: Any, hint: str | None = None) -> dict[Any, Any]:
    """A map from a file (absent / null: empty); anything else is a one-line KvplanError naming the field."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KvplanError(f"{name} must be a map, got {_kind(value)}", hint)
    return value


def sequence(name: str, value: Any, hint: str | None = None) -> list[Any]:
    """A list from a file (absent / null: empty); anything else is a one-line KvplanError naming the field."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise KvplanError(f"{name} must be a list, got {_kind(value)}", hint)
    return value


# file systems whose "files" are the kernel's (process memory, device and kernel settings): never written to
SPECIAL_FS = {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs",
              "configfs", "pstore", "bpf", "efivarfs", "fusectl", "binfmt_misc", "mqueue", "hugetlbfs", "autofs",
              "rpc_pipefs", "nsfs", "selinuxfs"}


def _fs_type(dev: int) -> str | None:
    """The file system type of device *dev* (``/proc/self/mountinfo``: major:minor and the type after " - ")."""
    import os

    want = f"{os.major(dev)}:{os.minor(dev)}"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4 and fields[2] == want and " - " in line:
                    return line.split(" - ", 1)[1].split()[0]
    except OSError:
        return None
    return None


def output_file(name: str, value: Any, hint: str | None = None) -> str:
    """A path kvplan writes (a log, an events file, a report): :func:`path`, and an existing target must be a
    regular file on an ordinary file system: ``/proc/self/mem``, ``/sys/...`` and ``/dev/...`` stat as regular or
    special files but are the kernel's, and a FIFO would block the write forever. Checked again when opened."""
    import os
    import stat

    p = path(name, value, hint)
    full = os.path.abspath(os.path.expanduser(p))
    try:
        st = os.stat(full)
    except FileNotFoundError:
        try:
            st = os.stat(os.path.dirname(full) or ".")
        except OSError:
            return p  # no such folder: the open says so
    except OSError as e:
        raise KvplanError(f"{name} {_short(p)}: {e.strerror}", hint) from None
    else:
        if not stat.S_ISREG(st.st_mode):
            raise KvplanError(f"{name} {_short(p)} is not a regular file", hint or f"give {name} a regular file")
    kind = _fs_type(st.st_dev)
    if kind in SPECIAL_FS:
        raise KvplanError(f"{name} {_short(p)} is on {kind}, the kernel's file system: kvplan writes only ordinary "
                          "files", hint or f"give {name} a file in a folder of yours")
    return p
