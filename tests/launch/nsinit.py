"""PID 1 of a private PID namespace for one test (``unshare -pf --mount-proc python nsinit.py CMD...``).

Runs CMD, forwards SIGINT/SIGTERM/SIGHUP to it, reaps every orphan, and when CMD exits lists what is still alive in
the namespace (nothing of a launch may outlive kvplan) into ``$NSINIT_REPORT`` as JSON; then it exits with CMD's
code (128+N for a signal), and the kernel kills whatever was left, so a test can never leak onto the machine."""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def alive_others() -> list[dict]:
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or d == "1":
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read(200).replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state not in ("Z", "X"):
            out.append({"pid": int(d), "state": state, "cmd": cmd})
    return out


def main() -> int:
    argv = sys.argv[1:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)

    def forward(sig, _frame):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)
    code = None
    while code is None:
        try:
            got, status = os.wait()
        except ChildProcessError:
            break
        if got == pid:
            code = os.waitstatus_to_exitcode(status)
    end = time.monotonic() + float(os.environ.get("NSINIT_SETTLE_S", "0.5"))
    left = alive_others()
    while left and time.monotonic() < end:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.02)
        left = alive_others()
    report = os.environ.get("NSINIT_REPORT")
    if report:
        with open(report, "w") as f:
            json.dump({"left": left}, f)
    code = code if code is not None else 127
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
