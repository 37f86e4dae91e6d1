"""Errors the user can act on. The CLI prints them as one line and exits 2."""

from __future__ import annotations

MAX_MESSAGE = 1000  # characters of a message (or of its hint): bad input is quoted, never dumped
# control characters from hostile input (newlines, ANSI escapes) shown escaped: the message stays one line
_CONTROL = {c: repr(chr(c))[1:-1] for c in (*range(32), 127)}


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """*text* on one line (control characters escaped), at most *limit* characters."""
    out = text.translate(_CONTROL)
    return out if len(out) <= limit else out[:limit - 3] + "..."


class KvplanError(Exception):
    """Bad input: says what was wrong, where, and what to do. Never shown as a traceback; always one line."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        base = one_line(super().__str__())
        return f"{base} ({one_line(self.hint)})" if self.hint else base


class UnsupportedModel(KvplanError):
    """The architecture is not one kvplan can model faithfully."""


class UnknownVersion(KvplanError):
    """The engine version is outside what kvplan has read."""
