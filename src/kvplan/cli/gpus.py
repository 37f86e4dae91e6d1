"""``kvplan gpus``: the embedded GPU catalog (nvidia-smi names, MiB, aliases)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    return sub.add_parser("gpus", help="list the GPU catalog")


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser) -> int:
    from kvplan.hardware.gpus import catalog_gpus

    for g in catalog_gpus():
        print(f"{g['name']:<48} {g['total_mib']:>8} MiB  aliases: {', '.join(g.get('aliases', []))}")
    return 0
