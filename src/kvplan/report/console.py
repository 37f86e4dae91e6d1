"""The Rich console kvplan prints to. A closed pipe (``kvplan check ... | head``) is not an error: Rich's own
handler turns it into ``SystemExit(1)``; this console raises ``BrokenPipeError`` instead, with stdout pointed at
/dev/null so nothing more is written, and the command exits with its own code (``cli.main``: 0, or the verdict's)."""

from __future__ import annotations

import os
import sys
from typing import Any


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail on a closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (a test's capture): nothing to redirect
        pass


def console(**kwargs: Any) -> Any:
    """A ``rich.console.Console`` (kwargs as Console's) whose broken pipe raises BrokenPipeError, not SystemExit."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            quiet_stdout()
            raise BrokenPipeError("stdout closed")

    return _Console(**kwargs)
