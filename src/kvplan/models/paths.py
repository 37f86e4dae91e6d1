"""``Path.is_dir()`` / ``Path.is_file()`` from one ``os.stat``, and one view of the filesystem per evaluation.

Every plan asks whether the model named in the command is a local directory or file, whether it sits in the HF cache
and whether a checkpoint directory is at hand; one stat answers both questions, without building a Path for each.
An evaluation (``kvplan.evaluation``: a launch, its findings' what-ifs, its suggested command, a tune run's
candidates) plans the same model many times within milliseconds: inside ``view(cache)`` each path is stat'ed once
and the answer reused, so one evaluation sees one consistent filesystem, as it sees one NVML.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# pathlib's _IGNORED_ERRNOS (Python 3.10-3.12 Path.is_dir / is_file): these mean "no", any other OSError raises
_IGNORED = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)
_VIEW: ContextVar[dict[str, int] | None] = ContextVar("kvplan_stat_view", default=None)


def _stat_mode(path: str | os.PathLike[str]) -> int:
    try:
        return os.stat(path).st_mode
    except OSError as e:
        if e.errno not in _IGNORED:
            raise
        return 0
    except ValueError:  # an embedded NUL byte
        return 0


def stat_mode(path: str | os.PathLike[str]) -> int:
    """``st_mode`` of ``path`` (links followed); 0 where ``Path.is_dir()`` and ``Path.is_file()`` answer False.
    Inside ``view`` a path is stat'ed once."""
    seen = _VIEW.get()
    if seen is None:
        return _stat_mode(path)
    key = os.fspath(path)
    mode = seen.get(key)
    if mode is None:
        mode = seen[key] = _stat_mode(path)
    return mode


@contextmanager
def view(cache: dict[str, int]) -> Iterator[None]:
    """Within the block, ``stat_mode`` answers each path from ``cache`` (filled on the first ask); an enclosing
    view stays in force."""
    if _VIEW.get() is not None:
        yield
        return
    token = _VIEW.set(cache)
    try:
        yield
    finally:
        _VIEW.reset(token)
