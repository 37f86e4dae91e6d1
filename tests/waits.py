"""Waiting on states, not on the clock: ports held for a server until it binds them, and a child's first line read
with a deadline (a silent child fails the test instead of hanging it)."""

from __future__ import annotations

import selectors
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO


@contextmanager
def reserved_port() -> Iterator[int]:
    """A port on 127.0.0.1 held by a bound, never listening socket (SO_REUSEADDR) for as long as the block runs.

    A server that binds with SO_REUSEADDR (Python's http.server, uvicorn, vLLM) can take it and listen; no other
    process can bind it without SO_REUSEADDR, and the kernel never hands it out for port 0 or an outgoing
    connection, so it is not reused between the moment the test picks it and the moment the server binds it. While
    nobody listens on it, a connection is refused at once."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]
    finally:
        s.close()


def readline(stream: IO[str], timeout: float) -> str:
    """One line of a child's text pipe, or an AssertionError after *timeout* seconds without a whole line."""
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            raise AssertionError(f"no output line within {timeout:g} s")
        return stream.readline()
    finally:
        sel.close()
