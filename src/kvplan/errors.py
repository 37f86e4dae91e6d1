"""Errors the user can act on. The CLI prints them as one line and exits 2."""

from __future__ import annotations


class KvplanError(Exception):
    """Bad input: says what was wrong, where, and what to do. Never shown as a traceback."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        base = super().__str__()
        return f"{base} ({self.hint})" if self.hint else base


class UnsupportedModel(KvplanError):
    """The architecture is not one kvplan can model faithfully."""


class UnknownVersion(KvplanError):
    """The engine version is outside what kvplan has read."""
