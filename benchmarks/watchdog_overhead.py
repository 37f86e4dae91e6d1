"""The watchdog's own cost while it supervises: CPU (% of one core) and memory (RSS, MB) of the `kvplan launch`
process, measured from /proc over a steady window, next to the targets (under 2 % of one core, under 60 MB).

Idle trees, each supervised for DURATION seconds (default 20) after a 2 s warm-up:
  * one idle process (plain output, as in CI or a log file);
  * a TP8-like tree: a parent with 8 idle children, readiness polled on a closed port (the health thread runs);
  * the same on a terminal (a pseudo-terminal): the Rich live view redraws twice a second.
Run: python benchmarks/watchdog_overhead.py [DURATION]
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

TARGET_CPU_PCT, TARGET_RSS_MB = 2.0, 60.0
TCK = os.sysconf("SC_CLK_TCK")
IDLE = [sys.executable, "-c", "import time; time.sleep(3600)"]
TP8 = [sys.executable, "-c", "import os, time\nfor _ in range(8):\n    if os.fork() == 0:\n        break\n"
       "time.sleep(3600)"]


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TCK  # utime + stime


def _status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def measure(name: str, command: list[str], extra: list[str], duration: float, tty: bool = False
            ) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, KVPLAN_STATE_DIR=tmp, COLUMNS="120", LINES="40")
        out, master = subprocess.DEVNULL, None
        if tty:
            master, out = os.openpty()
            threading.Thread(target=_drain, args=(master,), daemon=True).start()
        p = subprocess.Popen([sys.executable, "-m", "kvplan", "launch", *([] if tty else ["--plain"]), "--log",
                              f"{tmp}/log", *extra, "--", *command], stdout=out, stderr=subprocess.DEVNULL, env=env)
        try:
            time.sleep(2.0)  # start-up (imports, first scans) is not the steady cost
            c0, t0 = _cpu_s(p.pid), time.monotonic()
            time.sleep(duration)
            c1, t1 = _cpu_s(p.pid), time.monotonic()
            rss, hwm = _status_kb(p.pid, "VmRSS") / 1024, _status_kb(p.pid, "VmHWM") / 1024
        finally:
            p.send_signal(signal.SIGINT)
            code = p.wait(timeout=30)
            if tty:
                os.close(out)
    cpu = 100.0 * (c1 - c0) / (t1 - t0)
    ok = cpu < TARGET_CPU_PCT and hwm < TARGET_RSS_MB
    print(f"{name:<40} CPU {cpu:5.2f} % of one core (target < {TARGET_CPU_PCT:g} %)   RSS {rss:5.1f} MB, peak "
          f"{hwm:5.1f} MB (target < {TARGET_RSS_MB:g} MB)   {'OK' if ok else 'OVER'}   (stopped, exit {code})")
    return cpu, rss, hwm


def main(duration: float = 20.0) -> int:
    n_procs = sum(1 for d in os.listdir("/proc") if d.isdigit())
    print(f"kvplan launch watchdog overhead: {duration:g} s steady window, sampling every 0.25 s, "
          f"{n_procs} processes on this machine, {os.cpu_count()} cores")
    health = ["--health-url", f"http://127.0.0.1:{_closed_port()}/health", "--ready-timeout", "0"]
    results = [measure("1 idle process, plain", IDLE, [], duration),
               measure("TP8-like tree (9 proc) + /health, plain", TP8, health, duration),
               measure("TP8-like tree + /health, live view (tty)", TP8, health, duration, tty=True)]
    return 0 if all(c < TARGET_CPU_PCT and h < TARGET_RSS_MB for c, _r, h in results) else 1


if __name__ == "__main__":
    sys.exit(main(float(sys.argv[1]) if len(sys.argv) > 1 else 20.0))
