"""Values a running server reports (its info endpoint's JSON, metric labels, /v1/models cards), checked before an
engine's ``server_facts`` uses them: what does not fit is left out and named in ``ignored`` (diagnose notes it)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kvplan.errors import KvplanError


def obj(v: Any) -> dict[str, Any]:
    """``v`` when it is a JSON object, else an empty one."""
    return v if isinstance(v, dict) else {}


def text(v: Any) -> str | None:
    """``v`` when it is a non-blank string, else None."""
    return v if isinstance(v, str) and v.strip() else None


def plain(info: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar entries of a JSON object: strings, booleans, finite numbers a float can hold exactly."""
    return {k: v for k, v in info.items() if isinstance(k, str) and (
        isinstance(v, (str, bool)) or (isinstance(v, (int, float)) and math.isfinite(v) and abs(v) < 2**53))}


def whole(what: str, v: Any, ignored: list[str], lo: int = 1, hi: int = 1 << 40) -> int | None:
    """A reported count: a whole number in [lo, hi] (as JSON or as a label string); else None and an "ignored" note
    appended to ``ignored``."""
    from kvplan import validate

    if v is None or v in ("None", ""):
        return None
    try:
        return int(validate.number(what, v, lo=lo, hi=hi, integer=True))
    except KvplanError:
        ignored.append(f"ignored sample: {what} = {str(v)[:40]!r}")
        return None


def share(what: str, v: Any, ignored: list[str]) -> float | None:
    """A reported fraction in (0, 1]; else None and an "ignored" note."""
    from kvplan import validate

    if v in (None, "None", ""):
        return None
    try:
        return validate.fraction(what, v)
    except KvplanError:
        ignored.append(f"ignored sample: {what} = {str(v)[:40]!r}")
        return None
