"""Logs a few startup lines, then hangs silently while its memory climbs slowly (--step-mib (2) every
--interval s (0.05), i.e. 40 MiB/s by default)."""

from __future__ import annotations

import time

from _fault import arg, log, mono, record_pid, touch

record_pid()
log("Init torch distributed begin.")
log("Load weight begin. avail mem=79.10 GB")
log("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.48 GB, mem usage=15.11 GB.")
log(f"Capture cuda graph begin. This can take up to several minutes. avail mem=8.17 GB {mono()}")
step, interval = int(arg("--step-mib", 2) * 2**20), arg("--interval", 0.05)
keep = []
while True:
    keep.append(touch(step))
    time.sleep(interval)
