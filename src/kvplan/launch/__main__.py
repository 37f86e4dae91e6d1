"""``python -m kvplan.launch launch|cleanup [options] [-- command]``: the same two commands as ``kvplan launch`` and
``kvplan cleanup`` once they are wired into kvplan's own command line (``kvplan.cli.main``); the tests run them
this way, as a subprocess, so that kvplan (not pytest) is the subreaper of the launched tree."""

from __future__ import annotations

import argparse
import sys

from kvplan.launch.cli import add_parsers, run_cleanup, run_launch


def main(argv: list[str] | None = None) -> int:
    """``python -m kvplan.launch launch|cleanup ...`` (the same commands before they are wired into kvplan)."""
    from kvplan.errors import KvplanError

    args = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args:
        i = args.index("--")
        args, command = args[:i], args[i + 1:]
    parser = argparse.ArgumentParser(prog="kvplan")
    add_parsers(parser.add_subparsers(dest="cmd", metavar="COMMAND", required=True))
    a = parser.parse_args(args)
    try:
        return run_launch(a, command) if a.cmd == "launch" else run_cleanup(a)
    except KvplanError as e:
        print(f"kvplan: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
