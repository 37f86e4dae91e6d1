"""The launch state file: what ``kvplan cleanup`` needs when a launch's kvplan died before cleaning up.

One JSON file per running launch in ``$KVPLAN_STATE_DIR`` (default ``~/.cache/kvplan/launches``): the launch id, the
supervising kvplan (pid and start time), the root process (pid = session id, start time), the command, the log,
and the shared-memory segments tied to the launch so far. It is removed when the launch ends with nothing left.
Logs default to the same directory (``<id>.log``) and are kept.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def state_dir() -> Path:
    env = os.environ.get("KVPLAN_STATE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kvplan" / "launches"


def ensure_dir() -> Path:
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    return d


class LaunchState:
    def __init__(self, launch_id: str, data: dict[str, Any]):
        self.id = launch_id
        self.path = ensure_dir() / f"{launch_id}.json"
        self.data = {"id": launch_id, **data}

    def write(self, **changes: Any) -> None:
        self.data.update(changes)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def load_all() -> list[tuple[Path, dict[str, Any]]]:
    d = state_dir()
    out: list[tuple[Path, dict[str, Any]]] = []
    if not d.is_dir():
        return out
    for p in sorted(d.glob("*.json")):
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "id" in data:
            out.append((p, data))
    return out
