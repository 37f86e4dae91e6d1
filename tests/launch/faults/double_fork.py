"""Double-forks a grandchild into a new session (setsid) and lets the middle process exit, so the grandchild is
orphaned and outside the launch's session and process group (the parent reaps the middle process, as a daemonizing
launcher does); the grandchild then allocates memory step by step.
--clean-env: the grandchild also re-executes itself with an empty environment (no inherited marker).
--step-mib (16), --interval (0.02)."""

from __future__ import annotations

import os
import sys
import time

from _fault import arg, log, mono, record_pid, sleep_forever, touch


def grandchild() -> None:
    record_pid()
    step, interval = int(arg("--step-mib", 16) * 2**20), arg("--interval", 0.02)
    keep = []
    while True:
        keep.append(touch(step))
        print(f"grandchild {os.getpid()} sid {os.getsid(0)} allocated {len(keep) * step >> 20} MiB {mono()}",
              flush=True)
        time.sleep(interval)


if "--grandchild" in sys.argv:
    grandchild()

record_pid()
log("Init torch distributed begin.")
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(0.1)  # the middle process is gone by now: orphaned, re-parented
        if "--clean-env" in sys.argv:
            env = {"FAULT_PIDS": os.environ.get("FAULT_PIDS", ""), "PATH": "/usr/bin:/bin"}
            os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), "--grandchild", *sys.argv[1:]], env)
        grandchild()
    os._exit(0)
# the classic daemonize: the parent reaps the middle process at once (one left defunct, never reaped, is the
# signature of a dead rank, which kvplan rightly reports as rank-died once it has lived long enough: on a loaded
# machine the middle process can live that long)
os.waitpid(middle, 0)
log("Load weight begin. avail mem=79.10 GB")
sleep_forever()
