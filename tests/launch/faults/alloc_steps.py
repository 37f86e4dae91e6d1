"""Allocates real memory step by step until killed, printing SGLang-style startup lines (a host pool being
pinned). Options: --step-mib (16), --interval s (0.02), --workers N forked children that allocate too (0),
--shm-mib N: also a /dev/shm segment of N MiB (0), --max-mib N: stop growing there and wait (4096),
--until-available-mib N: grow only while the host's MemAvailable is above N MiB (0: no such floor), waiting there."""

from __future__ import annotations

import os
import time

from _fault import arg, log, mono, record_pid, shm_segment, sleep_forever, touch

step = int(arg("--step-mib", 16) * 2**20)
interval = arg("--interval", 0.02)
workers = int(arg("--workers", 0))
shm_mib = int(arg("--shm-mib", 0))
max_bytes = int(arg("--max-mib", 4096)) << 20
floor = int(arg("--until-available-mib", 0)) << 20


def available() -> int:
    with open("/proc/meminfo") as f:
        return next(int(x.split()[1]) << 10 for x in f if x.startswith("MemAvailable:"))


record_pid()
log("Init torch distributed begin.")
log("Load weight begin. avail mem=79.10 GB")
log("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.48 GB, mem usage=15.11 GB.")
keep = []
if shm_mib:
    keep.append(shm_segment(shm_mib << 20))
for _w in range(workers):
    if os.fork() == 0:
        record_pid()
        break
log("Allocating 300.00 GB host memory for hierarchical KV cache.")
n = 0
while n * step < max_bytes:
    if floor and available() <= floor:  # at the floor: hold, and grow again if the machine frees memory
        time.sleep(interval)
        continue
    keep.append(touch(step))
    n += 1
    print(f"allocated {n * step >> 20} MiB {mono()}", flush=True)  # per process (workers too)
    time.sleep(interval)
sleep_forever()
