"""``kvplan models``: the embedded model catalog (ids a launch command may name)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    return sub.add_parser("models", help="list the embedded model catalog")


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser) -> int:
    from kvplan.models.catalog import catalog_ids

    print("\n".join(catalog_ids()))
    return 0
