"""Tiny HTTP exporters on 127.0.0.1 for Prometheus to scrape: the replay of recorded SGLang ``/metrics`` pages
(``tests/data/fleet/sglang-kv-bound.metrics``), page after page, one per GET; when the pages run out it starts over,
each counter (``*_total``, ``*_count``, ``*_sum``, ``*_bucket``) raised by its growth over one pass, so counters
never go back, as a live server's would not."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kvplan.diagnose.prom import split_sample

DATA = Path(__file__).resolve().parents[2] / "data" / "fleet"
COUNTER_ENDS = ("_total", "_count", "_sum", "_bucket")


def recorded_pages(name: str = "sglang-kv-bound.metrics") -> list[str]:
    pages: list[list[str]] = []
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("# page "):
            pages.append([])
        elif pages:
            pages[-1].append(line)
    return ["\n".join(p) + "\n" for p in pages]


def _counters(page: str) -> dict[str, float]:
    out = {}
    for line in page.splitlines():
        parts = split_sample(line)
        if parts and parts[0].endswith(COUNTER_ENDS):
            out[f"{parts[0]}{{{parts[1]}}}"] = float(parts[2])
    return out


class Replay:
    """Page ``i`` of the recording at the i-th GET (cycling, counters raised by each pass's growth)."""

    def __init__(self, pages: list[str]):
        self.pages = pages
        first, last = _counters(pages[0]), _counters(pages[-1])
        step = {k: last[k] - first[k] for k in first}  # growth over one pass (then one more page's worth)
        n = len(pages)
        self.per_pass = {k: v * n / max(1, n - 1) for k, v in step.items()}
        self.served = 0
        self.lock = threading.Lock()

    def next_page(self) -> str:
        with self.lock:
            i, self.served = self.served, self.served + 1
        return self.page(i)

    def page(self, i: int) -> str:
        """The i-th page served (0-based)."""
        page, cycle = self.pages[i % len(self.pages)], i // len(self.pages)
        if not cycle:
            return page
        lines = []
        for line in page.splitlines():
            parts = split_sample(line)
            key = f"{parts[0]}{{{parts[1]}}}" if parts else ""
            if parts and key in self.per_pass:
                line = f"{parts[0]}{{{parts[1]}}} {float(parts[2]) + cycle * self.per_pass[key]:.1f}"
            lines.append(line)
        return "\n".join(lines) + "\n"


@contextmanager
def replay_exporter(pages: list[str] | None = None) -> Iterator[tuple[str, Replay]]:
    """(host:port, the replay) of an exporter serving the recorded pages at /metrics (anything else: 404)."""
    replay = Replay(pages or recorded_pages())

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = replay.next_page().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"127.0.0.1:{srv.server_address[1]}", replay
    finally:
        srv.shutdown()
        srv.server_close()
