"""Readiness: which URL to ask (from the command's ``--host`` / ``--port``, else the engine's default port, else
``--health-url``) and a thread that asks until the server answers: ``/health``, then ``/v1/models``, both 2xx.
Proxies from the environment are ignored (the server is local)."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.cmdline import LaunchCommand


def health_urls(cmd: LaunchCommand, engine: str | None, given: str | None) -> list[str]:
    """The readiness URLs of the launch: the engine's health paths on the command's --host/--port (else the
    engine's default port)."""
    if given:
        return [given]
    if engine is None:
        return []
    from kvplan.engines import get_engine
    from kvplan.engines.cmdline import Flag, parse_flags

    eng = get_engine(engine)
    f = parse_flags(cmd.args, [Flag("--port", "int"), Flag("--host")], abbrev=False)
    port = f.values.get("port") or eng.default_port
    host = str(f.values.get("host") or "127.0.0.1")
    if host in ("0.0.0.0", "::", "", "localhost"):
        host = "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return [f"http://{host}:{port}{path}" for path in eng.health_paths]


class HealthPoller(threading.Thread):
    """Polls the readiness URLs (no proxy) every 0.5 s until all answer 2xx; then wakes the loop and ends."""

    def __init__(self, urls: list[str], wake_fd: int):
        super().__init__(daemon=True, name="kvplan-health")
        self.urls, self.wake_fd = urls, wake_fd
        self.ready_at: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        import urllib.request

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while not self.stop.wait(0.5):
            try:
                for url in self.urls:
                    with opener.open(url, timeout=1.0) as r:
                        if not 200 <= r.status < 300:
                            raise OSError(r.status)
            except Exception:  # noqa: BLE001 - not ready yet (refused, 503, timeout, ...)
                continue
            self.ready_at = time.monotonic()
            try:
                os.write(self.wake_fd, b"r")
            except OSError:
                pass
            return
