"""``kvplan gpus [--json]``: the embedded GPU catalog (nvidia-smi / amd-smi names, MiB, platform, datasheet peaks,
aliases) as a Rich table or JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.exitcodes import HelpFormatter, exit_codes
    from kvplan.cli.options import json_option

    p = sub.add_parser("gpus", help="list the GPU catalog", epilog=exit_codes((0, "the catalog was printed")),
                       formatter_class=HelpFormatter)
    json_option(p, "print the catalog as one JSON object")
    return p


def gpu_rows() -> list[dict[str, Any]]:
    from kvplan.hardware.gpus import all_gpus

    return [g.to_dict() for g in all_gpus()]


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser) -> int:
    from kvplan.cli.tables import NARROW, add_columns, console, table

    rows = gpu_rows()
    if a.json:
        print(json.dumps({"scope": "total_mib: memory.total as nvidia-smi / amd-smi print it; mem_bw_gbps: decimal "
                          "GB/s; *_dense_tflops: dense, no sparsity; compute_capability: CUDA 'major.minor' "
                          "(null: not NVIDIA); architecture: NVIDIA architecture or AMD gfx target",
                          "gpus": rows}, indent=2))
        return 0
    con = console()
    wide = con.width >= NARROW  # narrower: the aliases under the name, no platform column (all of it in --json)
    t = table("kvplan GPU catalog", con)
    add_columns(t, (("name (as nvidia-smi / amd-smi print it)" if wide else "name / aliases", "left"),
                    *((("platform", "left"),) if wide else ()), ("MiB", "right"), ("GB/s", "right"),
                    ("BF16", "right"), ("FP8", "right"), *((("aliases", "left"),) if wide else ())))

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"

    for g in rows:
        nums = (f"{g['total_mib']:,}" if g["total_mib"] else "?", num(g["mem_bw_gbps"]),
                num(g["bf16_dense_tflops"]), num(g["fp8_dense_tflops"]))
        aliases = ", ".join(g["aliases"])
        if wide:
            t.add_row(g["name"], g["platform"], *nums, aliases)
        else:
            t.add_row(g["name"] + (f"\n[dim]{aliases}[/]" if aliases else ""), *nums)
    con.print(t)
    con.print("MiB: memory.total as nvidia-smi / amd-smi print it; GB/s: memory bandwidth (datasheet); BF16, FP8: "
              "dense TFLOPS, no sparsity")
    return 0
