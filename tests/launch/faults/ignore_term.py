"""Ignores SIGTERM (itself and a forked child), logs a few lines, then waits forever without ever being ready.
Only SIGKILL ends it. --alloc-mib N: also hold N MiB."""

from __future__ import annotations

import os
import signal

from _fault import arg, log, record_pid, sleep_forever, touch

signal.signal(signal.SIGTERM, signal.SIG_IGN)
record_pid()
hold = touch(int(arg("--alloc-mib", 8)) << 20)
log("Init torch distributed begin.")
log("Load weight begin. avail mem=79.10 GB")
if os.fork() == 0:  # the child inherits SIG_IGN
    record_pid()
sleep_forever()
