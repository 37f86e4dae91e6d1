"""Ignores SIGTERM (itself and a forked child), logs a few lines, then waits forever without ever being ready.
Only SIGKILL ends it. Each SIGTERM it ignores is logged ("ignored SIGTERM", once per process: the state a test waits
for before it acts on kvplan's grace). --alloc-mib N: also hold N MiB (8), after the first lines."""

from __future__ import annotations

import os
import signal

from _fault import arg, log, mono, record_pid, sleep_forever, touch


def _ignored(_sig, _frame) -> None:
    print(f"ignored SIGTERM in {os.getpid()} {mono()}", flush=True)


signal.signal(signal.SIGTERM, _ignored)
record_pid()
log("Init torch distributed begin.")
hold = touch(int(arg("--alloc-mib", 8)) << 20)
log("Load weight begin. avail mem=79.10 GB")
if os.fork() == 0:  # the child inherits the handler
    record_pid()
sleep_forever()
