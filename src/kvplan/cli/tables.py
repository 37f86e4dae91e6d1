"""The console the catalog tables (``kvplan gpus``, ``kvplan models``) print to."""

from __future__ import annotations

import sys
from typing import Any


def console() -> Any:
    """A terminal gets its own width (long values wrap); a pipe gets a wide table so grep finds whole names."""
    from kvplan.report.console import console as make_console

    return make_console() if sys.stdout.isatty() else make_console(width=220)
