"""The console the catalog tables (``kvplan gpus``, ``kvplan models``) print to."""

from __future__ import annotations

from typing import Any


def console() -> Any:
    """The terminal's width, else ``COLUMNS``, else 80 (a pipe): long values wrap by word inside their column
    (``--json`` is for scripts that want whole values on one line)."""
    from kvplan.report.console import console as make_console

    return make_console()


NARROW = 110  # below this width the catalogs leave out their least-read column (still in --json)


def table(title: str, con: Any) -> Any:
    """A catalog table for ``con``: Rich's box drawing on a terminal, ASCII when piped (``awk length`` counts bytes:
    a box character is three)."""
    from rich import box
    from rich.table import Table

    return Table(title=title, box=box.HEAVY_HEAD if con.is_terminal else box.ASCII)


def add_columns(t: Any, columns: tuple[tuple[str, str], ...]) -> None:
    """Text columns wrap by word (a word longer than the column is folded); numbers stay on one line."""
    for col, just in columns:
        t.add_column(col, justify=just, overflow="fold", no_wrap=just == "right")
