"""A parent forks rank workers; one worker dies after --life seconds (exit code 1, or SIGKILL with --killed, like
the OOM killer) and the parent never reaps it: it stays defunct while the parent and the other ranks wait.
--workers N (2), --life s (0.4)."""

from __future__ import annotations

import os
import signal
import sys
import time

from _fault import arg, log, mono, record_pid, sleep_forever, touch

record_pid()
workers, life = int(arg("--workers", 2)), arg("--life", 0.4)
log("Init torch distributed begin.", None)
for rank in range(workers):
    if os.fork() == 0:
        record_pid()
        hold = touch(16 << 20)
        log("Load weight begin. avail mem=79.10 GB", rank)
        if rank == workers - 1:
            time.sleep(life)
            log(f"RuntimeError: CUDA error: an illegal memory access was encountered {mono()}", rank)
            if "--killed" in sys.argv:
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(1)
        sleep_forever()
sleep_forever()  # never waits for its children
