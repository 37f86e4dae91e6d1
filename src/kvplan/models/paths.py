"""``Path.is_dir()`` / ``Path.is_file()`` from one ``os.stat``: every plan asks whether the model named in the
command is a local directory or file, whether it sits in the HF cache and whether a checkpoint directory is at hand;
one stat answers both questions, without building a Path for each."""

from __future__ import annotations

import errno
import os

# pathlib's _IGNORED_ERRNOS (Python 3.10-3.12 Path.is_dir / is_file): these mean "no", any other OSError raises
_IGNORED = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def stat_mode(path: str | os.PathLike[str]) -> int:
    """``st_mode`` of ``path`` (links followed); 0 where ``Path.is_dir()`` and ``Path.is_file()`` answer False."""
    try:
        return os.stat(path).st_mode
    except OSError as e:
        if e.errno not in _IGNORED:
            raise
        return 0
    except ValueError:  # an embedded NUL byte
        return 0
