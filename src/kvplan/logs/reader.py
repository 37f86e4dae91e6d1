"""Read a log as lines, streaming, whatever it contains: ANSI colours stripped, over-long lines cut, binary
files and other programs' logs refused with a clear message. Memory stays bounded for any file size."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from kvplan.errors import KvplanError

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
MAX_LINE = 64 * 1024  # longer lines (server_args dumps can be long) are cut here
SNIFF = 8192


def _open_regular(p: Path) -> int:
    """A read descriptor on *p*, which must be a regular file: a FIFO, a socket or a device would hang the read or
    never end (opened without blocking, then checked with fstat)."""
    import stat

    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise KvplanError(f"no log at {p}", "pass the engine's startup log file") from None
    except IsADirectoryError:
        raise KvplanError(f"{p} is a directory", "pass the log file itself") from None
    except OSError as e:
        raise KvplanError(f"{p}: cannot read ({e.strerror})") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        os.close(fd)
        raise KvplanError(f"{p} is a directory", "pass the log file itself")
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise KvplanError(f"{p} is not a regular file (a pipe, socket or device)", "save the log to a file first")
    os.set_blocking(fd, True)
    return fd


def open_log(path: str | Path) -> Path:
    from kvplan import validate

    p = Path(os.path.expanduser(validate.path("the log", str(path), hint="pass the engine's log file")))
    fd = _open_regular(p)
    try:
        with open(fd, "rb", closefd=False) as f:
            head = f.read(SNIFF)
    except OSError as e:
        raise KvplanError(f"{p}: cannot read ({e.strerror})") from None
    finally:
        os.close(fd)
    if not head:
        raise KvplanError(f"{p} is empty", "pass a log that holds the engine's startup lines")
    if b"\x00" in head:
        raise KvplanError(f"{p} is a binary file, not a log")
    return p


def iter_lines(path: str | Path) -> Iterator[str]:
    """Lines without ANSI codes or trailing newlines; invalid UTF-8 replaced; very long lines truncated."""
    p = open_log(path)
    with open(_open_regular(p), "rb") as f:
        while True:
            raw = f.readline(MAX_LINE)
            if not raw:
                return
            if len(raw) == MAX_LINE and not raw.endswith(b"\n"):
                while True:  # skip the rest of an over-long line without holding it
                    more = f.readline(MAX_LINE)
                    if not more or more.endswith(b"\n"):
                        break
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if "\x1b" in text:
                text = ANSI.sub("", text)
            yield text
