"""Fake hostile HTTP servers on 127.0.0.1 for ``kvplan diagnose --url`` (raw sockets, so they can break HTTP):
a page table ``path -> handler(sock)``; a handler writes whatever bytes it likes, as slowly as it likes."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Handler = Callable[[socket.socket], None]


def ok(body: bytes, ctype: str = "text/plain") -> Handler:
    def h(s: socket.socket) -> None:
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype.encode() + b"\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    return h


def js(obj: object) -> Handler:
    return ok(json.dumps(obj).encode(), "application/json")


def raw(data: bytes) -> Handler:
    def h(s: socket.socket) -> None:
        s.sendall(data)
    return h


def drip(head: bytes = b"HTTP/1.1 200 OK\r\n", every_s: float = 1.0, stop: threading.Event | None = None) -> Handler:
    """Sends *head*, then one byte every *every_s* seconds, forever (until the client closes)."""
    def h(s: socket.socket) -> None:
        s.sendall(head)
        while stop is None or not stop.is_set():
            time.sleep(every_s)
            s.sendall(b"X")
    return h


def huge(n_bytes: int, line: bytes) -> Handler:
    """A /metrics page of *n_bytes*, streamed (never held): *line* repeated."""
    def h(s: socket.socket) -> None:
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + str(n_bytes).encode()
                  + b"\r\n\r\n")
        block = line * max(1, (1 << 20) // len(line))
        sent = 0
        while sent < n_bytes:
            part = block[: n_bytes - sent]
            s.sendall(part)
            sent += len(part)
    return h


def redirect(location: str) -> Handler:
    return raw(f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode())


def nothing() -> Handler:
    return lambda s: None


@contextmanager
def server(pages: dict[str, Handler]) -> Iterator[tuple[str, list[str]]]:
    """``(base URL, log of request lines)``; unknown paths get a 404."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    seen: list[str] = []
    done = threading.Event()

    def one(c: socket.socket) -> None:
        try:
            c.settimeout(30)
            req = b""
            while b"\r\n\r\n" not in req:
                data = c.recv(4096)
                if not data:
                    return
                req += data
            line = req.split(b"\r\n", 1)[0].decode(errors="replace")
            seen.append(line)
            path = line.split(" ")[1] if line.count(" ") >= 2 else "/"
            pages.get(path, raw(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))(c)
        except OSError:
            pass
        finally:
            c.close()

    def loop() -> None:
        srv.settimeout(0.2)
        while not done.is_set():
            try:
                c, _ = srv.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=one, args=(c,), daemon=True).start()

    th = threading.Thread(target=loop, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}", seen
    finally:
        done.set()
        th.join(2)
        srv.close()
