"""``--events FILE``: one JSON object per line, written as things happen (flushed, so ``tail -f`` works).

Every line has ``t`` (seconds since the launch started, 3 decimals) and ``event``:

* ``{"event": "phase", "phase": NAME, "tree_bytes": N, "host_available_bytes": N}``: a new startup phase; NAME is
  one of ``start``, ``dist_init``, ``weights``, ``kv_pool``, ``cuda_graphs``, ``host_pool``, ``ready``
  (``kvplan.launch.phases.PHASES``).
* ``{"event": "ready", "url": URL|null, "via": "http"|"log"}``: the server answered.
* ``{"event": "abort", "reason": REASON, "signal": ..., "phase": ..., "message": ..., "numbers": {...}}``: REASON is
  one of ``host-memory``, ``gpu-memory``, ``stall``, ``rank-died``, ``ready-timeout``.
* ``{"event": "exit", "code": N, "by": "server"|"abort"|"request", "server_code": N|null, "left": [pids],
  "shm_removed": [paths], "killed": N}``: the end; ``left`` is empty when nothing survived.

Secret values (``--api-key X``, ``HF_TOKEN=X``) in any string are redacted (``launch.redact``).
"""

from __future__ import annotations

import json
import time
from typing import IO, Any

EVENTS = ("phase", "ready", "abort", "exit")


class EventLog:
    def __init__(self, path: str | None, t0: float | None = None, stream: IO[str] | None = None):
        self.t0 = time.monotonic() if t0 is None else t0
        self._f: IO[str] | None = open(path, "a", buffering=1) if path else None  # noqa: SIM115 - closed in close()
        self._stream = stream

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        if event not in EVENTS:
            raise ValueError(f"unknown event {event!r}")
        from kvplan.launch.redact import obj

        rec = {"t": round(time.monotonic() - self.t0, 3), "event": event, **obj(fields)}
        line = json.dumps(rec, default=str)
        for f in (self._f, self._stream):
            if f is not None:
                f.write(line + "\n")
                f.flush()
        return rec

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
