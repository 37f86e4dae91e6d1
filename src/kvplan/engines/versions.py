"""Version strings as engines publish them ("0.4.6.post5", "0.5.3rc0", "0.10.1.1"): one ``Version`` type and one range
check (``within``) for both engines' version tables, SGLang's defaults and the log parsers' format hints."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

from kvplan.errors import KvplanError, UnknownVersion

_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.-]?(post|rc|dev|a|b)\.?(\d*))?(?:\+.*)?$")


def _parse(text: str) -> tuple[str, tuple[int, int, int, int, int, int]]:
    m = _RE.match(text.strip())
    if not m:
        raise KvplanError(f"cannot read engine version {text!r}", "pass --engine-version like 0.5.9")
    major, minor, patch, extra, tag, num = m.groups()
    rank = {"dev": -3, "a": -2, "b": -2, "rc": -1, None: 0, "post": 1}[tag]
    return text.strip().lstrip("v"), (int(major), int(minor), int(patch or 0), int(extra or 0), rank, int(num or 0))


_PARSED: dict[str, tuple[str, tuple[int, int, int, int, int, int]]] = {}  # text -> (text, key): parsed once


class Version:
    """Comparable engine version. ``post`` sorts after the release, ``rc``/``dev`` before it."""

    def __init__(self, text: str):
        if not isinstance(text, str) or len(text) > 64:
            shown = text[:40] + "..." if isinstance(text, str) else type(text).__name__
            raise KvplanError(f"cannot read engine version {shown!r}", "pass --engine-version like 0.5.9")
        parsed = _PARSED.get(text)
        if parsed is None:
            parsed = _parse(text)
            if len(_PARSED) >= 4096:  # the tables name a few dozen; a bound all the same
                _PARSED.clear()
            _PARSED[text] = parsed
        self.text, self.key = parsed

    @property
    def release(self) -> tuple[int, int, int, int]:
        """The release numbers without pre/post/local tags: 0.33.0rc1, 0.33.0.post1 and 0.33.0+cu129 are 0.33.0."""
        return self.key[0], self.key[1], self.key[2], self.key[3]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self.key == other.key

    def __lt__(self, other: Version) -> bool:
        return self.key < other.key

    # written out rather than derived by total_ordering: a plan compares versions a few dozen times
    def __le__(self, other: Version) -> bool:
        return self.key <= other.key

    def __gt__(self, other: Version) -> bool:
        return self.key > other.key

    def __ge__(self, other: Version) -> bool:
        return self.key >= other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    def __str__(self) -> str:
        return self.text


def within(version: Version, oldest: str, newest: str) -> bool:
    """The one range check: ``oldest`` <= version, and its release at most ``newest``'s (any pre/post/local build of
    the newest release read keeps that release's behaviour)."""
    return version >= Version(oldest) and version.release <= Version(newest).release


def require_known(version: str, oldest: str, newest: str, engine: str) -> Version:
    """``version`` parsed, or UnknownVersion when it is outside what kvplan has read of ``engine``."""
    v = Version(version)
    if not within(v, oldest, newest):
        raise UnknownVersion(f"{engine} {version} is outside what kvplan has read ({oldest} .. {newest})",
                             f"pass --engine-version between {oldest} and {newest}")
    return v


def newest_allowed(hint: str) -> str | None:
    """The newest version every format marker of a log allows: the lowest '<=X' or range end, not below any 'X+'
    (``version_hint`` of LogFacts, e.g. "<=0.5.15 (ServerArgs dump); 0.4.4-0.5.14 (KV line has #tokens)")."""
    v = r"(\d+\.\d+(?:\.\d+)?)"
    ranges = re.findall(v + r"\s*[–-]\s*" + v, hint)
    uppers = re.findall(r"<=\s*" + v, hint) + [r[1] for r in ranges]
    lowers = re.findall(v + r"\+", hint) + [r[0] for r in ranges]
    try:
        top = min((Version(u) for u in uppers), default=None)
        low = max((Version(x) for x in lowers), default=None)
    except KvplanError:
        return None
    if top is not None and (low is None or low <= top):
        return top.text
    return low.text if low is not None else None


def installed_version(dist: str) -> str | None:
    """Version of an installed distribution, without importing it; read once per process and ``sys.path`` (every
    plan without --engine-version asks, and importlib.metadata walks every path entry)."""
    import sys

    key = (dist, tuple(sys.path))
    hit = _INSTALLED.get(key)
    if hit is not None:
        return hit[0]
    from importlib import metadata

    try:
        found: str | None = metadata.version(dist)
    except metadata.PackageNotFoundError:
        found = None
    if len(_INSTALLED) >= 64:
        _INSTALLED.clear()
    _INSTALLED[key] = (found,)
    return found


_INSTALLED: dict[tuple[str, tuple[str, ...]], tuple[str | None]] = {}


class _Row(Protocol):
    @property
    def since(self) -> str: ...


R = TypeVar("R", bound=_Row)


def select_row(rows: Sequence[R], version: Version) -> R:
    """The last row of a version table (rows sorted by ``since``) whose ``since`` is at or below ``version``."""
    row = rows[0]
    for r in rows:
        if version >= Version(r.since):
            row = r
    return row
