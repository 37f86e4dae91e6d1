"""The console the catalog tables (``kvplan gpus``, ``kvplan models``) print to."""

from __future__ import annotations

import sys
from typing import Any


def console() -> Any:
    """A terminal gets its own width (long values wrap); a pipe gets a wide table so grep finds whole names."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=220)
