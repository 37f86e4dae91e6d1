"""How fast `kvplan explain` streams a large log, next to `wc -l` on the same file, and its peak memory.

    python benchmarks/explain_throughput.py [MB]      (default 500 MB of serving lines after a real startup log)
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START = ROOT.parent / "shared" / "logcorpus" / "raw" / "sglang-docs-llama31-8b-80gb-v041.txt"
LINE = ("[2025-08-11 17:20:00 TP0] Decode batch. #running-req: 233, #token: 370959, token usage: 0.82, "
        "cuda graph: True, gen throughput (token/s): 4594.01, #queue-req: 317\n")


def main(mb: int = 500) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "big.log"
        with p.open("w") as f:
            f.write(START.read_text())
            chunk = LINE * 10000
            while f.tell() < mb * 2**20:
                f.write(chunk)
        size = p.stat().st_size / 2**20
        t = time.perf_counter()
        subprocess.run(["wc", "-l", str(p)], capture_output=True, check=True)
        wc = time.perf_counter() - t
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "kvplan", "explain", str(p), "--json", "--gpu", "h100",
                              "--engine-version", "0.4.1", "--model-config",
                              str(ROOT / "tests" / "data" / "llama31_8b_config.json")], capture_output=True)
        ours = time.perf_counter() - t
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        assert out.returncode == 0, out.stderr.decode()
    print(f"log size                 : {size:,.0f} MB")
    print(f"wc -l                    : {wc:6.2f} s  ({size / wc:,.0f} MB/s)")
    print(f"kvplan explain           : {ours:6.2f} s  ({size / ours:,.0f} MB/s, {ours / wc:.1f}x wc -l)")
    print(f"peak RSS (largest child) : {rss:,.0f} MB")
    print(f"2 GB log projected       : {2048 / (size / ours):.0f} s")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT / "src"))
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
