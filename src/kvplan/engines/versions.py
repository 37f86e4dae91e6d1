"""Version strings as engines publish them ("0.4.6.post5", "0.5.3rc0", "0.10.1.1") and comparisons."""

from __future__ import annotations

import re
from functools import total_ordering

from kvplan.errors import KvplanError

_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.-]?(post|rc|dev|a|b)\.?(\d*))?(?:\+.*)?$")


@total_ordering
class Version:
    """Comparable engine version. ``post`` sorts after the release, ``rc``/``dev`` before it."""

    def __init__(self, text: str):
        m = _RE.match(text.strip())
        if not m:
            raise KvplanError(f"cannot read engine version {text!r}", "pass --engine-version like 0.5.9")
        major, minor, patch, extra, tag, num = m.groups()
        self.text = text.strip().lstrip("v")
        rank = {"dev": -3, "a": -2, "b": -2, "rc": -1, None: 0, "post": 1}[tag]
        self.key = (int(major), int(minor), int(patch or 0), int(extra or 0), rank, int(num or 0))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self.key == other.key

    def __lt__(self, other: Version) -> bool:
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    def __str__(self) -> str:
        return self.text


def V(text: str) -> Version:  # noqa: N802 - short constructor used in version tables
    return Version(text)


def installed_version(dist: str) -> str | None:
    """Version of an installed distribution, without importing it (importlib.metadata is cheap)."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def select_row(rows, version: Version):
    """The last row of a version table (rows sorted by ``since``) whose ``since`` is at or below ``version``."""
    row = rows[0]
    for r in rows:
        if version >= Version(r.since):
            row = r
    return row
