"""Engines register here by name; each package owns its flags, versions, memory rules and log formats.

The registry maps an engine name to a module path so that nothing heavy is imported before it is used.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from kvplan.engines.cmdline import LaunchCommand, split_command
from kvplan.errors import KvplanError

__all__ = ["ENGINES", "Engine", "detect_engine", "get_engine", "split_command", "LaunchCommand"]


class Engine(Protocol):
    name: str

    def matches(self, cmd: LaunchCommand) -> bool: ...

    def plan(self, cmd: LaunchCommand, options: Any) -> Any: ...

    def rewrite(self, cmd: LaunchCommand, flags: dict[str, str | None]) -> str: ...


ENGINES: dict[str, str] = {"sglang": "kvplan.engines.sglang.engine:ENGINE", "vllm": "kvplan.engines.vllm.engine:ENGINE"}


def get_engine(name: str) -> Engine:
    if name not in ENGINES:
        raise KvplanError(f"unknown engine {name!r}", "known: " + ", ".join(sorted(ENGINES)))
    mod, attr = ENGINES[name].split(":")
    return getattr(importlib.import_module(mod), attr)


def detect_engine(cmd: LaunchCommand) -> Engine:
    """The engine whose launcher this command runs, or a clear error."""
    for name in ENGINES:
        eng = get_engine(name)
        if eng.matches(cmd):
            return eng
    prog = " ".join(cmd.program) or cmd.text()
    raise KvplanError(f"not a known engine launch command: {prog!r}",
                      "expected `python -m sglang.launch_server ...`, `sglang serve ...`, `vllm serve MODEL ...` or "
                      "`python -m vllm.entrypoints.openai.api_server --model ...`")
