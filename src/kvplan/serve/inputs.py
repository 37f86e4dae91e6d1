"""The page's request: validated fields, slider settings turned into engine flags, the options ``check`` takes.

    {"command": str, "gpu": str, "gpu_mem_mib": int, "gpus_per_node": int, "nodes": int, "host_mem_gib": float,
     "engine_version": str, "avg_tokens": int, "weights_gib": float, "free_gib": float, "kv_memory_gib": float,
     "model_config": object | str (a pasted config.json),
     "set": {"fraction": float, "host_kv": float, "hicache_ratio": float, "tp": int, "dp": int,
             "dp_attention": bool, "fp8_kv": bool, "max_running": int}}
Every field but ``command`` is optional; an unknown field, a wrong type or a value out of range is a KvplanError
(HTTP 400, one line). The engine turns the sliders into its flags (``Engine.slider_flags``) and applies them with its
own ``rewrite`` (aliases kept in place), so the effective command is one a user could run, and ``check --json`` of
it gives the same JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kvplan import validate
from kvplan.errors import KvplanError

MAX_COMMAND_CHARS = 8192
MAX_CONFIG_CHARS = 256 * 1024
NUM = (int, float)
# field: (types, low, high); None bounds are not checked
FIELDS: dict[str, tuple[tuple[type, ...], float | None, float | None]] = {
    "gpu": ((str,), None, None), "gpu_mem_mib": ((int,), 1024, 10_000_000), "gpus_per_node": ((int,), 1, 64),
    "nodes": ((int,), 1, 1024), "host_mem_gib": (NUM, 0.001, 1_000_000), "engine_version": ((str,), None, None),
    "avg_tokens": ((int,), 1, 100_000_000), "weights_gib": (NUM, 0, 100_000), "free_gib": (NUM, 0.001, 100_000),
    "kv_memory_gib": (NUM, 0, 100_000),
}
SLIDERS: dict[str, tuple[tuple[type, ...], float | None, float | None]] = {
    "fraction": (NUM, 0.01, 1.0), "host_kv": (NUM, 0, 1_000_000), "hicache_ratio": (NUM, 0, 1000),
    "tp": ((int,), 1, 1024), "dp": ((int,), 1, 1024), "dp_attention": ((bool,), None, None),
    "fp8_kv": ((bool,), None, None), "max_running": ((int,), 0, 10_000_000),
}
_VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z.+-]{0,31}$")


@dataclass(frozen=True)
class PlanRequest:
    command: str
    options: dict[str, Any] = field(default_factory=dict)  # check()'s options (model_config filled in later)
    sliders: dict[str, Any] = field(default_factory=dict)
    model_config: dict[str, Any] | None = None  # a pasted config.json


def _value(name: str, v: Any, spec: tuple[tuple[type, ...], float | None, float | None]) -> Any:
    types, lo, hi = spec
    if isinstance(v, bool) and bool not in types:
        raise KvplanError(f"{name} must be a number, got {json.dumps(v)}")
    if not isinstance(v, types):
        want = "true or false" if bool in types else "a string" if str in types else (
            "an integer" if types == (int,) else "a number")
        raise KvplanError(f"{name} must be {want}, got {json.dumps(v)[:40]}")
    if isinstance(v, str) and len(v) > 200:
        raise KvplanError(f"{name} is too long ({len(v)} characters)")
    if lo is not None and hi is not None and isinstance(v, NUM) and not isinstance(v, bool) and not lo <= v <= hi:
        raise KvplanError(f"{name} must be between {lo:g} and {hi:g}, got {v:g}")
    return v


def _config(raw: Any) -> dict[str, Any] | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        if len(raw) > MAX_CONFIG_CHARS:
            raise KvplanError(f"the pasted config.json is over {MAX_CONFIG_CHARS // 1024} KiB")
        raw = validate.json_value(raw, "the pasted config.json", hint="paste the model's config.json as it is")
    if not isinstance(raw, dict):
        raise KvplanError("the pasted config.json must be a JSON object")
    return raw


def parse_request(body: Any) -> PlanRequest:
    if not isinstance(body, dict):
        raise KvplanError("the request must be a JSON object", 'e.g. {"command": "python -m sglang.launch_server ..."}')
    known = {"command", "model_config", "set", *FIELDS}
    unknown = sorted(set(body) - known)
    if unknown:
        raise KvplanError(f"unknown field(s): {', '.join(unknown)[:200]}", f"known: {', '.join(sorted(known))}")
    cmd = body.get("command")
    if not isinstance(cmd, str) or not cmd.strip():
        raise KvplanError("give the launch command", "paste it as you run it, e.g. python -m sglang.launch_server "
                          "--model-path Qwen/Qwen3-8B")
    if len(cmd) > MAX_COMMAND_CHARS:
        raise KvplanError(f"the launch command is over {MAX_COMMAND_CHARS} characters")
    opts = {k: _value(k, body[k], FIELDS[k]) for k in FIELDS if body.get(k) is not None}
    if "engine_version" in opts and not _VERSION_RE.match(opts["engine_version"]):
        raise KvplanError(f"engine_version {opts['engine_version']!r} is not a version", "e.g. 0.5.9")
    sliders = body.get("set") or {}
    if not isinstance(sliders, dict):
        raise KvplanError("set must be an object of slider values")
    bad = sorted(set(sliders) - set(SLIDERS))
    if bad:
        raise KvplanError(f"unknown slider(s): {', '.join(bad)[:200]}", f"known: {', '.join(SLIDERS)}")
    sliders = {k: _value(k, v, SLIDERS[k]) for k, v in sliders.items() if v is not None}
    return PlanRequest(cmd, opts, sliders, _config(body.get("model_config")))
