"""A tiny server on 127.0.0.1: answers /health and /v1/models (200) after --delay s (0.3), logs a vLLM-style line,
and with --alloc-after-ready N allocates N MiB per 0.05 s once it is serving (memory growth after ready)."""

from __future__ import annotations

import http.server
import threading
import time

from _fault import arg, record_pid, touch

record_pid()
port, delay, grow = int(arg("--port", 0)), arg("--delay", 0.3), int(arg("--alloc-after-ready", 0))
print("INFO 11-29 09:00:02 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: ...", flush=True)
time.sleep(delay)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        ok = self.path in ("/health", "/v1/models")
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(b'{"data": []}' if ok else b"")

    def log_message(self, *a):
        pass


srv = http.server.HTTPServer(("127.0.0.1", port), Handler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
print("INFO:     Application startup complete.", flush=True)
keep = []
while True:
    time.sleep(0.05)
    if grow:
        keep.append(touch(grow << 20))
