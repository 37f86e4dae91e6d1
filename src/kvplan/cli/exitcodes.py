"""Exit codes in every subcommand's --help: an epilog kept as written (a table), the description still wrapped.

    p = sub.add_parser(..., epilog=exit_codes((0, "..."), (2, "...")), formatter_class=HelpFormatter)
"""

from __future__ import annotations

import argparse
import textwrap

HEAD = "exit codes:"
COMMON = ((2, "bad usage, a bad option value or unreadable input (one line says what)"),
          (130, "interrupted (Ctrl-C); a closed output pipe (| head) is no error: the command's own code"))


def exit_codes(*rows: tuple[int, str]) -> str:
    """The epilog: one row per code (the subcommand's own, then the common 2 / 130 unless given)."""
    given = {c for c, _ in rows}
    lines = [HEAD]
    for code, what in (*rows, *(r for r in COMMON if r[0] not in given)):
        wrapped = textwrap.wrap(what, 90) or [""]
        lines.append(f"  {code if code >= 0 else 'N':<4} {wrapped[0]}")
        lines += [f"       {w}" for w in wrapped[1:]]
    return "\n".join(lines)


class HelpFormatter(argparse.HelpFormatter):
    """Wraps the description as usual; the exit-code table is printed as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(HEAD):
            return "".join(indent + line + "\n" for line in text.splitlines())
        return super()._fill_text(text, width, indent)


PLAN_EXIT_CODES = ((0, "planned; warnings allowed (verdict ok or warn)"),
                   (1, "an error finding (verdict fail): the launch would fail or hang the box; the fixed command is "
                    "suggested"))
LAUNCH_EXIT_CODES = ((0, "a clean stop after Ctrl-C / SIGTERM to kvplan (or the server's own 0)"),
                     (1, "the preflight found errors and refused (pass --force to launch anyway)"),
                     (2, "the preflight cannot plan the command (without --force), bad usage or a bad option"),
                     (3, "kvplan aborted the launch (host-memory, gpu-memory, stall, rank-died, ready-timeout)"),
                     (4, "after the stop, processes of the launch were still alive (listed)"),
                     (127, "the command could not be started"),
                     (-1, "otherwise: the server's own exit code, when it exited by itself"),
                     (130, "the output pipe closed (Ctrl-C stops the launch cleanly: 0)"))
