"""How fast this machine hands a process fresh host memory: the part of pinning a pool that needs no GPU.

Pinning a host pool (``cudaHostRegister``, ``cudaHostAlloc``, torch's ``pin_memory``) faults in, zeroes and locks
every page, one thread at a time. Without a GPU the lock cannot be measured, but the fault-and-zero part can, and
it bounds the rate from above (kvplan.hostmem.PIN_RATE cites this script for its low end). Three ways, each on a
fresh allocation of SIZE GiB, ROUNDS times:

- ``torch.empty`` + ``fill_`` (first touch: fault + zero + write), then a second ``fill_`` (write only);
- ``torch.zeros`` (what vLLM-CPU does for its KV cache);
- an anonymous ``MAP_SHARED`` mapping pre-faulted with ``MADV_POPULATE_WRITE`` (what SGLang 0.5.23 and vLLM's
  offload region do before ``cudaHostRegister``).

Run it with an interpreter that has torch (the vLLM-CPU venv): ``.venv-vllm/bin/python benchmarks/pin_rate.py 4 3``;
without torch only the mmap figure is printed. On the project's shared 2-core VM (AMD EPYC, THP madvise), five runs
at loads 2-10: first touch 0.43-2.02 GB/s, torch.zeros 0.80-2.40 GB/s, MAP_SHARED + MADV_POPULATE_WRITE
0.59-1.59 GB/s, write only 15-28 GB/s.
"""

from __future__ import annotations

import mmap
import sys
import time

GiB = 1 << 30
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux 5.14+


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds / 1e9:.2f} GB/s"


def main(size_gib: float = 4.0, rounds: int = 3) -> None:
    n = int(size_gib * GiB)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)  # the engines fault a pool from one thread
    for _ in range(rounds):
        if torch is not None:
            t = torch.empty(n, dtype=torch.uint8)
            s = time.perf_counter()
            t.fill_(1)
            first = time.perf_counter() - s
            s = time.perf_counter()
            t.fill_(2)
            again = time.perf_counter() - s
            del t
            s = time.perf_counter()
            z = torch.zeros(n, dtype=torch.uint8)
            zeros = time.perf_counter() - s
            del z
            print(f"{size_gib:g} GiB: first touch {_rate(n, first)}, write only {_rate(n, again)}, "
                  f"torch.zeros {_rate(n, zeros)}", end="; ")
        m = mmap.mmap(-1, n, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        s = time.perf_counter()
        m.madvise(MADV_POPULATE_WRITE)
        pop = time.perf_counter() - s
        m.close()
        print(f"MAP_SHARED + MADV_POPULATE_WRITE {_rate(n, pop)}")


if __name__ == "__main__":
    main(*(float(a) if i == 0 else int(a) for i, a in enumerate(sys.argv[1:3])))
