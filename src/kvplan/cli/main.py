"""``kvplan`` command line. argparse only (fast start); each subcommand is a module of this package
(``add_parser(subparsers)``, ``run(args, command, parser) -> exit code``) that loads heavy modules inside ``run``.

Exit codes: 0 ok (warnings allowed), 1 an error finding, 2 bad usage or unreadable input; a closed pipe on
stdout is not an error (the command's own code, quietly).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

STARTED = time.monotonic()  # when the CLI started: diagnose --url counts its time bound from here

SUBCOMMANDS = ("check", "plan", "explain", "diagnose", "gpus", "models", "launch", "cleanup", "serve", "simulate",
               "tune")


class Parser(argparse.ArgumentParser):
    """argparse with bad usage as one line on stderr and a hint (exit 2); the usage block only for ``-h``."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.commands: dict[str, argparse.ArgumentParser] = {}  # the subcommands' own parsers

    def error(self, message: str) -> NoReturn:
        from kvplan.errors import one_line

        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser(only: Sequence[str] = SUBCOMMANDS) -> Parser:
    """The parser of kvplan with the subcommands ``only`` (all by default; one when the command line names it,
    so that a command imports nothing of the others)."""
    from kvplan import __version__

    parser = Parser(
        prog="kvplan", description="What every GPU rank and host will allocate for an SGLang or vLLM launch, "
        "before you launch it.")
    parser.add_argument("--version", action="version", version=f"kvplan {__version__}")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND")
    for name in only:
        parser.commands[name] = importlib.import_module(f"kvplan.cli.{name}").add_parser(sub)
    return parser


def _run(argv: list[str]) -> int:
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser((first,) if first in SUBCOMMANDS else SUBCOMMANDS)
    a = parser.parse_args(argv)
    if a.cmd is None:
        print(f"kvplan: error: no command given (one of {', '.join(SUBCOMMANDS)}; see kvplan --help)",
              file=sys.stderr)
        return 2
    from kvplan.report.html.cli import precheck

    precheck(a)  # --html without jinja2: one line before any work
    # the subcommand's own parser: its errors say "kvplan check: error: ... (see kvplan check --help)"
    code: int = importlib.import_module(f"kvplan.cli.{a.cmd}").run(a, command, parser.commands.get(a.cmd, parser))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    from kvplan.errors import KvplanError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args)
    except KvplanError as e:
        print(f"kvplan: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of a pipe left (`kvplan gpus | head`): not an error, exit quietly
        from kvplan.report.console import quiet_stdout

        quiet_stdout()
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - never a traceback for the user
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        print(f"kvplan: internal error: {type(e).__name__}: {e} (set KVPLAN_DEBUG=1 for a traceback; "
              "please report it)", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
