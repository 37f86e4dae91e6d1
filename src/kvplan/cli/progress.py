"""A Rich progress bar over a sampling window, on stderr, only for a person at a terminal (never with --json, never
when stderr is a pipe or a file): ``with sampling_bar(window_s, enabled) as update: ... update(elapsed, window)``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Update = Callable[[float, float], None]


def wanted(json_output: bool, stream: Any = None) -> bool:
    """A bar only on an interactive stderr and never beside JSON output."""
    s = stream if stream is not None else sys.stderr
    try:
        return not json_output and bool(s.isatty())
    except (AttributeError, ValueError):
        return False


@contextmanager
def sampling_bar(window_s: float, enabled: bool, what: str = "sampling the server") -> Iterator[Update | None]:
    """Yields the update callback (None when disabled); the bar disappears when the window ends."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/"
                   "{task.total:.0f} s"), TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    task = bar.add_task(what, total=max(window_s, 0.1))

    def update(elapsed_s: float, total_s: float) -> None:
        bar.update(task, completed=min(elapsed_s, total_s), total=max(total_s, 0.1))

    with bar:
        yield update
