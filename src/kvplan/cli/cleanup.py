"""``kvplan cleanup``: stop what your earlier kvplan launches left (kvplan.launch.cleanup), after confirmation.

Exit codes: 0 nothing left (or nothing found, or ``--dry-run``), 1 declined or something could not be stopped or
removed, 2 bad input.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.exitcodes import HelpFormatter, exit_codes
    c = sub.add_parser("cleanup", help="stop what your earlier kvplan launches left (processes, /dev/shm segments)",
                       description="For each launch state file of yours whose kvplan is gone: stop the processes "
                       "that prove to be the launch's (its secret in their environment, recorded pid and start time, "
                       "your uid) and remove the /dev/shm segments it recorded (same inode, yours, unused), after "
                       "confirmation. Launches whose kvplan runs, in any visible PID namespace, are left alone. "
                       "Orphaned engine ranks, GPU holders and other leftovers are only reported.",
                       epilog=exit_codes((0, "nothing left (or nothing found, or --dry-run)"),
                                         (1, "declined, or something could not be stopped or removed (a permission "
                                          "error is reported as such)")), formatter_class=HelpFormatter)
    c.add_argument("--yes", "-y", action="store_true", help="do not ask")
    c.add_argument("--dry-run", action="store_true", help="only list what would be stopped or removed")
    c.add_argument("--min-age", type=float, default=60.0,
                   help="report engine-looking /dev/shm files no launch recorded once unused this many seconds "
                   "(default 60; they are never removed)")
    return c


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser | None = None) -> int:
    from kvplan import validate
    from kvplan.launch.cleanup import run as cleanup

    a.min_age = validate.seconds("--min-age", a.min_age)
    return cleanup(yes=a.yes, dry_run=a.dry_run, min_age=a.min_age)
