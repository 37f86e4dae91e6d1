"""The Prometheus HTTP API (``/api/v1/series``, ``/api/v1/query_range``) of one server, read bounded.

Only the URL given is queried: every request goes to ``<URL>/api/v1/...`` through ``diagnose.http`` with no redirect
followed (a reverse proxy that redirects is refused with the target named: give the final URL), one deadline per
request (``DEADLINE_S``, also sent as the query's own ``timeout`` so Prometheus stops evaluating it), a byte cap
per answer (``MAX_ANSWER_BYTES``; past it the answer is cut, its complete elements kept and a note says so) and a
budget for the whole run (``BUDGET_S``). Answers are read as they stream in (``diagnose.promjson``): one element
(one series) at a time, never the whole answer.

Credentials come from the environment only, never from the command line (a URL with ``user:password@`` is refused):
``KVPLAN_PROMETHEUS_TOKEN`` (``Authorization: Bearer``), else ``KVPLAN_PROMETHEUS_USER`` and
``KVPLAN_PROMETHEUS_PASSWORD`` (basic auth). The header goes to the URL given only, and no message shows it.
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kvplan.diagnose import http
from kvplan.diagnose.promjson import ArrayStream, PromJsonError
from kvplan.errors import KvplanError

ENV_TOKEN, ENV_USER, ENV_PASSWORD = "KVPLAN_PROMETHEUS_TOKEN", "KVPLAN_PROMETHEUS_USER", "KVPLAN_PROMETHEUS_PASSWORD"
DEADLINE_S = 10.0  # per request: connect, headers and the whole answer
BUDGET_S = 45.0  # every request of one run
MAX_ANSWER_BYTES = 64 << 20
ERROR_BYTES = 4096  # of a non-2xx answer: Prometheus' own error message
AUTH_HINT = f"set {ENV_TOKEN} (bearer token) or {ENV_USER} and {ENV_PASSWORD} (basic auth) in the environment"
Getter = Callable[..., http.Response]  # http.get's signature


def check_url(url: str) -> str:
    """The base URL (scheme, host, port, path prefix; no trailing slash), or a one-line KvplanError."""
    try:
        u = urllib.parse.urlsplit(url)
        u.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise KvplanError(f"--prometheus {url[:80]!r}: not a URL", "e.g. --prometheus http://127.0.0.1:9090") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise KvplanError(f"--prometheus {url[:80]!r}: not an http(s) URL", "e.g. --prometheus http://127.0.0.1:9090")
    if u.username is not None or u.password is not None:
        raise KvplanError("--prometheus: credentials in the URL are refused (they would show in the process list "
                          "and the shell history)", AUTH_HINT)
    if u.query or u.fragment:
        raise KvplanError(f"--prometheus {url[:80]!r}: a query or fragment in the URL", "give the server's base URL")
    return urllib.parse.urlunsplit((u.scheme, u.netloc, u.path.rstrip("/"), "", ""))


def auth_header(env: Mapping[str, str]) -> dict[str, str]:
    token, user, password = env.get(ENV_TOKEN), env.get(ENV_USER), env.get(ENV_PASSWORD)
    if token:
        return {"Authorization": f"Bearer {token.strip()}"}
    if user is not None or password is not None:
        if not user or password is None:
            raise KvplanError(f"{ENV_USER} and {ENV_PASSWORD} go together", AUTH_HINT)
        pair = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return {"Authorization": f"Basic {pair}"}
    return {}


@dataclass
class Answer:
    path: str
    elements: int = 0
    bytes_read: int = 0
    truncated: bool = False
    result_type: str | None = None


@dataclass
class Prometheus:
    """One Prometheus server; ``notes`` collects what the answers said (cut answers, warnings)."""

    url: str
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    get: Getter = http.get
    clock: Callable[[], float] = time.monotonic
    budget_s: float = BUDGET_S
    notes: list[str] = field(default_factory=list)
    requests: int = 0
    bytes_read: int = 0
    seconds: float = 0.0  # wall time spent waiting on the answers

    def __post_init__(self) -> None:
        self.url = check_url(self.url)
        self.headers = auth_header(self.env)
        self.until = self.clock() + self.budget_s
        host = urllib.parse.urlsplit(self.url).hostname or ""
        if self.headers and self.url.startswith("http:") and not http.is_loopback(host):
            self.notes.append("credentials sent over plain http (use https)")

    def series(self, match: str, start: float, end: float, on_element: Callable[[Any], None],
               limit: int) -> Answer:
        """``/api/v1/series``: the label sets of the series ``match`` selects over [start, end]."""
        return self._read("/api/v1/series", {"match[]": match, "start": _t(start), "end": _t(end),
                                             "limit": str(limit)}, ("data",), on_element)

    def query_range(self, query: str, start: float, end: float, step: float,
                    on_element: Callable[[Any], None]) -> Answer:
        """``/api/v1/query_range``: each series of ``query`` evaluated at start, start + step, ... end."""
        return self._read("/api/v1/query_range", {"query": query, "start": _t(start), "end": _t(end),
                                                  "step": _t(step)}, ("data", "result"), on_element)

    def _read(self, path: str, params: dict[str, str], key: tuple[str, ...],
              on_element: Callable[[Any], None]) -> Answer:
        left = self.until - self.clock()
        if left <= 0:
            raise KvplanError(f"{self.url}: the {self.budget_s:g} s for reading Prometheus are over before "
                              f"GET {path}", "narrow with --match or a shorter --window")
        deadline = min(DEADLINE_S, left)
        params = {**params, "timeout": f"{max(1, int(deadline))}s"}
        full = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        stream = ArrayStream(key, on_element)
        ans = Answer(path)
        self.requests += 1
        t0 = self.clock()
        try:
            resp = self.get(full, stream.feed, deadline, MAX_ANSWER_BYTES, False, headers=self.headers,
                            max_redirects=0, error_bytes=ERROR_BYTES)
            ans.bytes_read, ans.truncated = resp.bytes_read, resp.truncated
            self.bytes_read += resp.bytes_read
            if resp.truncated:
                self.notes.append(f"GET {path}: the answer was cut at {MAX_ANSWER_BYTES:,} bytes "
                                  f"({stream.elements:,} series read; the rest was not): narrow with --match")
            else:
                stream.close()
        except http.HttpError as e:
            raise KvplanError(f"{self.url}: GET {path}: {_http_error(e)}", _hint(e)) from None
        except TimeoutError:
            raise KvplanError(f"{self.url}: GET {path}: no complete answer within {deadline:g} s",
                              "narrow with --match or a shorter --window") from None
        except PromJsonError as e:
            raise KvplanError(f"{self.url}: GET {path}: {e}", "is --prometheus the Prometheus server's base URL "
                              "(its HTTP API answers under /api/v1)?") from None
        except OSError as e:
            raise KvplanError(f"{self.url}: {_os_error(e)}", "check --prometheus and that the server runs") from None
        finally:
            self.seconds += self.clock() - t0
        ans.elements, ans.result_type = stream.elements, stream.result_type
        return ans


def _t(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")


def _http_error(e: http.HttpError) -> str:
    """The error line: HTTP status and Prometheus' own message when the body carries one (4 KiB at most)."""
    msg = str(e)
    if e.body:
        try:
            doc = json.loads(e.body.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            doc = None
        said = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(said, str) and said.strip():
            msg += f": {said.strip()[:300]}"
    if e.code in (401, 403):
        msg += " (unauthorized)"
    elif e.code == 404:
        msg += " (no Prometheus HTTP API here)"
    return msg


def _hint(e: http.HttpError) -> str:
    if e.code in (401, 403):
        return AUTH_HINT
    if e.code in (400, 422):
        return "check --match (label matchers: job=\"vllm\",namespace=~\"llm-.*\")"
    if e.code == 404:
        return "give the Prometheus server's base URL (its API answers under /api/v1)"
    return "check --prometheus and that the server runs"


def _os_error(e: OSError) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    why = getattr(e, "strerror", None) or str(e) or type(e).__name__
    return f"{type(e).__name__} ({why})"
