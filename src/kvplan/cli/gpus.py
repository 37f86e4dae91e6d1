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
    from kvplan.cli.tables import console

    rows = gpu_rows()
    if a.json:
        print(json.dumps({"scope": "total_mib: memory.total as nvidia-smi / amd-smi print it; mem_bw_gbps: decimal "
                          "GB/s; *_dense_tflops: dense, no sparsity", "gpus": rows}, indent=2))
        return 0
    from rich.table import Table

    t = Table(title="kvplan GPU catalog")
    for col, just in (("name (as nvidia-smi / amd-smi print it)", "left"), ("platform", "left"), ("MiB", "right"),
                      ("HBM GB/s", "right"), ("BF16 TFLOPS", "right"), ("FP8 TFLOPS", "right"),
                      ("aliases", "left")):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"

    for g in rows:
        t.add_row(g["name"], g["platform"], f"{g['total_mib']:,}" if g["total_mib"] else "?", num(g["mem_bw_gbps"]),
                  num(g["bf16_dense_tflops"]), num(g["fp8_dense_tflops"]), ", ".join(g["aliases"]))
    console().print(t)
    return 0
