"""A bounded HTTP GET for ``kvplan diagnose --url`` (stdlib sockets only): whatever the server does, a request ends.

* One deadline per request covers connect, status line, headers and body: every ``recv`` waits at most the time
  left, so a server that drips one byte a second ends at the deadline like one that says nothing.
* The body is streamed in chunks to the caller and capped (``max_bytes``); past the cap the connection is closed
  and the response says ``truncated``.
* Redirects (301/302/303/307/308) are followed only to the same scheme, host and port (at most 3, or
  ``max_redirects``: 0 refuses every redirect); any other target is refused with a note.
* Extra request headers (``headers``: an Authorization header) go only to the URL given and the redirects kept on
  it; a value with a line break is refused (no header injection).
* Proxies from the environment (``http_proxy`` ...) are never used for loopback hosts (127.0.0.0/8, ::1,
  localhost); for other hosts they are honoured unless ``no_proxy`` says otherwise.
* Malformed HTTP (no status line, a bad status code, oversized or broken headers, a bad chunk size) is an
  :class:`HttpError` with a one-line message, never a traceback.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

DEADLINE_S = 5.0
MAX_HEADER_BYTES = 64 << 10
CHUNK = 64 << 10
MAX_REDIRECTS = 3
_STATUS = re.compile(rb"^HTTP/1\.[01] ([1-5]\d\d)(?: [^\r\n]*)?$")


class HttpError(Exception):
    """A request that did not give a usable answer: one line, with ``code`` when the server answered non-2xx."""

    def __init__(self, message: str, code: int | None = None, body: bytes = b""):
        super().__init__(message)
        self.code = code
        self.body = body  # the first bytes of a non-2xx answer's body, when the caller asked for them


@dataclass
class Response:
    url: str
    status: int
    truncated: bool = False  # the body was cut: at max_bytes, or at the deadline (timed_out)
    timed_out: bool = False
    bytes_read: int = 0
    notes: list[str] = field(default_factory=list)


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _proxy_for(scheme: str, host: str) -> tuple[str, int] | None:
    if is_loopback(host):
        return None
    proxies = urllib.request.getproxies()
    if scheme not in proxies or urllib.request.proxy_bypass(host):
        return None
    p = urllib.parse.urlsplit(proxies[scheme] if "://" in proxies[scheme] else "http://" + proxies[scheme])
    return (p.hostname, p.port or 80) if p.hostname and p.scheme == "http" else None


class _Conn:
    """One socket with the request's deadline on every operation."""

    def __init__(self, host: str, port: int, deadline: float, tls_host: str | None):
        self.deadline = deadline
        self.sock = socket.create_connection((host, port), timeout=self._left())
        if tls_host is not None:
            import ssl

            self.sock = ssl.create_default_context().wrap_socket(self.sock, server_hostname=tls_host)
        self.buf = b""

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline")
        return left

    def send(self, data: bytes) -> None:
        self.sock.settimeout(self._left())
        self.sock.sendall(data)

    def recv(self) -> bytes:
        self.sock.settimeout(self._left())
        return self.sock.recv(CHUNK)

    def read_until(self, sep: bytes, limit: int) -> bytes:
        while sep not in self.buf:
            if len(self.buf) > limit:
                raise HttpError(f"more than {limit:,} bytes without the end of the headers")
            data = self.recv()
            if not data:
                raise HttpError("the server closed the connection in the middle of the headers")
            self.buf += data
        head, _, self.buf = self.buf.partition(sep)
        return head

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _headers(conn: _Conn) -> tuple[int, dict[str, str]]:
    head = conn.read_until(b"\r\n\r\n", MAX_HEADER_BYTES)
    lines = head.split(b"\r\n")
    m = _STATUS.match(lines[0])
    if not m:
        raise HttpError(f"malformed status line {lines[0][:60]!r}")
    headers: dict[str, str] = {}
    for raw in lines[1:]:
        k, sep, v = raw.partition(b":")
        if not sep or not k.strip() or b" " in k.strip():
            raise HttpError(f"malformed header line {raw[:60]!r}")
        headers[k.strip().decode("latin-1").lower()] = v.strip().decode("latin-1")
    return int(m.group(1)), headers


def _body(conn: _Conn, headers: dict[str, str]) -> Iterator[bytes]:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = conn.read_until(b"\r\n", 1024).split(b";")[0].strip()
            if not re.fullmatch(rb"[0-9a-fA-F]{1,15}", line):
                raise HttpError(f"malformed chunk size {line[:20]!r}")
            left = int(line, 16)
            if left == 0:
                return
            while left > 0:
                if not conn.buf:
                    conn.buf = conn.recv()
                    if not conn.buf:
                        raise HttpError("the server closed the connection in the middle of a chunk")
                piece, conn.buf = conn.buf[:left], conn.buf[left:]
                left -= len(piece)
                yield piece
            while len(conn.buf) < 2:
                data = conn.recv()
                if not data:
                    raise HttpError("the server closed the connection after a chunk")
                conn.buf += data
            conn.buf = conn.buf[2:]
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise HttpError(f"malformed Content-Length {length[:20]!r}")
        left = int(length)
        if conn.buf:
            yield conn.buf[:left]
            left -= len(conn.buf[:left])
        while left > 0:
            data = conn.recv()
            if not data:
                raise HttpError(f"the server closed the connection {left:,} bytes before the end of the body")
            yield data[:left]
            left -= len(data)
        return
    if conn.buf:
        yield conn.buf
    while data := conn.recv():
        yield data


def _error_body(conn: _Conn, headers: dict[str, str], limit: int) -> bytes:
    """The first ``limit`` bytes of a non-2xx answer's body (its error message), within the request's deadline."""
    got = b""
    try:
        for chunk in _body(conn, headers):
            got += chunk[:limit - len(got)]
            if len(got) >= limit:
                break
    except (HttpError, OSError):
        pass
    return got


def _extra_headers(headers: Mapping[str, str] | None) -> str:
    out = ""
    for k, v in (headers or {}).items():
        if any(c in f"{k}{v}" for c in "\r\n\0") or not k or ":" in k or not f"{k}{v}".isascii():
            raise HttpError(f"request header {k[:40]!r}: a line break, a non-ASCII character or a bad name: refused")
        out += f"{k}: {v}\r\n"
    return out


def get(url: str, sink: Callable[[bytes], None], deadline_s: float = DEADLINE_S, max_bytes: int = 16 << 20,
        partial: bool = False, headers: Mapping[str, str] | None = None, max_redirects: int = MAX_REDIRECTS,
        error_bytes: int = 0) -> Response:
    """GET *url*, feeding the body to *sink* chunk by chunk. Raises HttpError (non-2xx, malformed, refused
    redirect), TimeoutError (the deadline) or OSError (connection). With *partial*, a deadline reached in the
    middle of the body ends it instead (``truncated`` and ``timed_out``): the caller keeps what it read.
    *headers* are sent as given (see the module docstring); with *error_bytes*, a non-2xx answer's HttpError
    carries the first bytes of its body (``body``)."""
    deadline = time.monotonic() + deadline_s
    notes: list[str] = []
    origin = None
    extra = _extra_headers(headers)
    for _ in range(max(0, max_redirects) + 1):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise HttpError(f"not an http(s) URL: {url[:80]!r}")
        try:
            port = u.port or (443 if u.scheme == "https" else 80)
        except ValueError:
            raise HttpError(f"bad port in {url[:80]!r}") from None
        here = (u.scheme, u.hostname.lower(), port)
        origin = origin or here
        if here != origin:
            raise HttpError(f"redirect to {url[:80]} refused (another host or port than {origin[1]}:{origin[2]})")
        proxy = _proxy_for(u.scheme, u.hostname) if u.scheme == "http" else None
        target = url if proxy else (urllib.parse.urlunsplit(("", "", u.path or "/", u.query, "")))
        host_hdr = u.netloc.rsplit("@", 1)[-1]
        conn = _Conn(*(proxy or (u.hostname, port)), deadline, u.hostname if u.scheme == "https" else None)
        try:
            conn.send(f"GET {target} HTTP/1.1\r\nHost: {host_hdr}\r\nUser-Agent: kvplan-diagnose\r\n{extra}"
                      "Accept-Encoding: identity\r\nConnection: close\r\n\r\n".encode("latin-1", "replace"))
            status, got = _headers(conn)
            if status in (301, 302, 303, 307, 308) and got.get("location"):
                url = urllib.parse.urljoin(url, got["location"])
                if max_redirects <= 0:
                    raise HttpError(f"redirect to {url[:80]} refused (only the URL given is queried)", code=status)
                notes.append(f"redirected to {url[:80]}")
                continue
            if not 200 <= status < 300:
                body = _error_body(conn, got, error_bytes) if error_bytes > 0 else b""
                raise HttpError(f"HTTP {status}", code=status, body=body)
            resp = Response(url, status, notes=notes)
            try:
                for chunk in _body(conn, got):
                    room = max_bytes - resp.bytes_read
                    if len(chunk) > room:
                        sink(chunk[:room])
                        resp.bytes_read += room
                        resp.truncated = True
                        break
                    sink(chunk)
                    resp.bytes_read += len(chunk)
            except TimeoutError:
                if not partial:
                    raise
                resp.truncated = resp.timed_out = True
            return resp
        finally:
            conn.close()
    raise HttpError(f"more than {max_redirects} redirects")


def get_bytes(url: str, deadline_s: float = DEADLINE_S, max_bytes: int = 1 << 20) -> tuple[bytes, Response]:
    """The whole (capped) body of a small answer, e.g. a JSON endpoint."""
    parts: list[bytes] = []
    resp = get(url, parts.append, deadline_s, max_bytes)
    return b"".join(parts), resp
