"""``kvplan cleanup``: stop what earlier launches left (kvplan.launch.cleanup), after confirmation."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    c = sub.add_parser("cleanup", help="stop what earlier launches left: processes, GPU holders, /dev/shm segments",
                       description="Find processes of earlier kvplan launches (state files, the KVPLAN_LAUNCH_ID "
                       "marker), orphaned engine ranks (also those holding GPU memory), and stale engine /dev/shm "
                       "segments; remove them after confirmation. Processes that cannot be tied to an engine launch "
                       "are never touched.")
    c.add_argument("--yes", "-y", action="store_true", help="do not ask")
    c.add_argument("--dry-run", action="store_true", help="only list")
    c.add_argument("--min-age", type=float, default=60.0,
                   help="/dev/shm segments not tied to a launch must be unused and this many seconds old (default 60)")
    return c


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser | None = None) -> int:
    from kvplan.launch.cleanup import run as cleanup

    return cleanup(yes=a.yes, dry_run=a.dry_run, min_age=a.min_age)
