"""Engines register here by name; each package owns its flags, versions, memory rules and log formats.

The registry maps an engine name to ``module:attribute`` of its Engine object (kvplan.engines.base.Engine), so that
nothing is imported before it is used. A new engine is one package plus one line in ``ENGINES``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from kvplan.engines.base import Engine
from kvplan.engines.cmdline import LaunchCommand
from kvplan.engines.cmdline import split_command as _split
from kvplan.errors import KvplanError

__all__ = ["DEFAULT_ENGINE", "ENGINES", "Engine", "LaunchCommand", "all_engines", "detect_engine", "get_engine",
           "register", "split_command"]

ENGINES: dict[str, str] = {
    "sglang": "kvplan.engines.sglang.engine:ENGINE",
    "vllm": "kvplan.engines.vllm.engine:ENGINE",
}
DEFAULT_ENGINE = "sglang"  # what `kvplan plan` builds a launch for when --engine is not given


def register(name: str, target: str) -> None:
    """Add an engine (``module:attribute`` of its Engine object), e.g. from a plugin or a test."""
    ENGINES[name] = target


def get_engine(name: str) -> Engine:
    if not isinstance(name, str) or name not in ENGINES:
        if not isinstance(name, str):
            raise KvplanError(f"the engine must be a name, got {type(name).__name__}",
                              "known: " + ", ".join(sorted(ENGINES)))
        raise KvplanError(f"unknown engine {name!r}", "known: " + ", ".join(sorted(ENGINES)))
    mod, attr = ENGINES[name].split(":")
    engine: Engine = getattr(importlib.import_module(mod), attr)
    return engine


def all_engines() -> list[Engine]:
    """Every registered engine, in registration order (the order detection and log sniffing try them)."""
    return [get_engine(name) for name in ENGINES]


def split_command(command: Sequence[str] | str) -> LaunchCommand:
    """Separate env prefixes and wrappers from the program and its flags (``<cli> serve`` of any engine)."""
    return _split(command, tuple(e.cli for e in all_engines() if e.cli))


def detect_engine(cmd: LaunchCommand) -> Engine:
    """The engine whose launcher this command runs, or a clear error."""
    for eng in all_engines():
        if eng.matches(cmd):
            return eng
    prog = " ".join(cmd.program) or cmd.text()
    hints = ", ".join(e.launch_hint for e in all_engines() if e.launch_hint)
    raise KvplanError(f"not a known engine launch command: {prog!r}", f"expected {hints}")
