"""Cold-start time of `kvplan check` on the incident command, next to `python -c pass`, measured side by side.

Prints medians of N interleaved runs and their ratio. Run: python benchmarks/coldstart.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

INCIDENT = ["check", "--example", "--json"]


def _time(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def main(n: int = 15) -> None:
    base, ours, imp = [], [], []
    for _ in range(n):  # interleaved so machine noise hits both alike
        base.append(_time([sys.executable, "-c", "pass"]))
        ours.append(_time([sys.executable, "-m", "kvplan", *INCIDENT]))
        imp.append(_time([sys.executable, "-c", "import kvplan.cli.main"]))
    b, o, i = statistics.median(base), statistics.median(ours), statistics.median(imp)
    print(f"python -c pass            : {b * 1000:7.1f} ms")
    print(f"import kvplan.cli.main    : {i * 1000:7.1f} ms  ({i / b:.1f}x python)")
    print(f"kvplan check --example    : {o * 1000:7.1f} ms  ({o / b:.1f}x python)  target <= 300 ms (issue 23)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
