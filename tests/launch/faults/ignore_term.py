"""Ignores SIGTERM (itself and a forked child), logs a few lines, then waits forever without ever being ready.
Only SIGKILL ends it. Each SIGTERM it ignores is logged ("ignored SIGTERM in PID": the state a test waits for before
it acts on kvplan's grace). Its last line comes once its child is up, so its memory is flat from then on.
--alloc-mib N: also hold N MiB (8), after the first line."""

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
up_r, up_w = os.pipe()
if os.fork() == 0:  # the child inherits the handler
    record_pid()
    os.write(up_w, b"up")
    sleep_forever()
# the last line comes once the child is up: the pages it copies from its parent as it starts (copy on write) are
# copied by then, so from the last line on the memory is flat
os.read(up_r, 2)
log("Load weight begin. avail mem=79.10 GB")
sleep_forever()
