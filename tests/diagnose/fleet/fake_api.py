"""A small model of the Prometheus HTTP API on 127.0.0.1 (raw sockets, so a test can also make it hostile), for the
fast tests: targets scraped every ``interval_s`` from ``t0`` to ``t1``, each scrape a /metrics page (a function of
the scrape time), and the four requests kvplan makes answered as Prometheus answers them:

- ``/api/v1/series``: the label sets (target labels + page labels) of the pages' series whose name the
  ``{__name__=~"a|b",k="v"}`` selector picks, over [start, end];
- ``/api/v1/query_range`` of ``max by (L) (timestamp({...}))`` and ``sum|max by (__name__,L) ({...})``: at each step
  t = start + k·step, each target's latest scrape at or before t (within the 5 min lookback), its series summed or
  peaked per group; ``timestamp`` is that scrape's time.

Only ``=`` label matchers are modelled. ``routes`` replaces any path's answer with a raw handler (hostile tests);
``seen`` records (request line, headers) of every request.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from kvplan.diagnose.prom import parse_prometheus

Page = Callable[[float], str]  # scrape time -> /metrics text
Handler = Callable[[socket.socket], None]
LOOKBACK_S = 300.0
_QUERY = re.compile(r'^(sum|max) by \(([^)]*)\) \((timestamp\()?\{__name__=~"([^"]*)"(?:,([^}]*))?\}\)?\)$')


@dataclass
class Target:
    labels: dict[str, str]  # job, instance, pod, ...
    page: Page
    t0: float
    t1: float
    interval_s: float = 1.0

    def scrape_at(self, t: float) -> float | None:
        """The time of the latest scrape at or before t (None: none within the lookback)."""
        if t < self.t0:
            return None
        s = self.t0 + math.floor((min(t, self.t1) - self.t0) / self.interval_s + 1e-9) * self.interval_s
        return s if t - s <= LOOKBACK_S else None

    def series(self, s: float) -> list[tuple[dict[str, str], float]]:
        out = []
        for name, rows in parse_prometheus(self.page(s)).items():
            for labels, v in rows:
                out.append(({**labels, **self.labels, "__name__": name}, v))
        return out


def _matchers(text: str | None) -> dict[str, str]:
    out = {}
    for part in filter(None, (text or "").split(",")):
        k, _, v = part.partition("=")
        out[k.strip()] = json.loads(v)
    return out


def _picks(labels: dict[str, str], names: set[str], eq: dict[str, str]) -> bool:
    return labels["__name__"] in names and all(labels.get(k, "") == v for k, v in eq.items())


@dataclass
class FakeProm:
    targets: list[Target] = field(default_factory=list)
    routes: dict[str, Handler] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    cache: dict[tuple, bytes] = field(default_factory=dict)  # answers by request (a memory test warms it first)

    def series(self, q: dict[str, str]) -> list[dict[str, str]]:
        m = re.match(r'^\{__name__=~"([^"]*)"(?:,(.*))?\}$', q["match[]"])
        assert m, q
        names, eq = set(m.group(1).split("|")), _matchers(m.group(2))
        start, end = float(q["start"]), float(q["end"])
        out: dict[tuple, dict[str, str]] = {}
        for t in self.targets:
            s = t.scrape_at(end)
            if s is None or s < start:
                continue
            for labels, _ in t.series(s):
                if _picks(labels, names, eq):
                    out[tuple(sorted(labels.items()))] = labels
        return list(out.values())

    def query_range(self, q: dict[str, str]) -> list[dict]:
        m = _QUERY.match(q["query"])
        assert m, q["query"]
        agg, by, ts = m.group(1), [x.strip() for x in m.group(2).split(",")], bool(m.group(3))
        names, eq = set(m.group(4).split("|")), _matchers(m.group(5))
        start, end, step = float(q["start"]), float(q["end"]), float(q["step"])
        groups: dict[tuple, dict] = {}
        k = 0
        while start + k * step <= end + 1e-9:
            t = round(start + k * step, 3)
            k += 1
            for tg in self.targets:
                s = tg.scrape_at(t)
                if s is None:
                    continue
                acc: dict[tuple, float] = {}
                for labels, v in tg.series(s):
                    if not _picks(labels, names, eq):
                        continue
                    key = tuple((b, labels[b]) for b in by if labels.get(b))
                    v = s if ts else v
                    acc[key] = v if key not in acc else (acc[key] + v if agg == "sum" else max(acc[key], v))
                for key, v in acc.items():
                    g = groups.setdefault(key, {"metric": dict(key), "values": []})
                    g["values"].append([t, repr(v) if not ts else f"{v:.3f}"])
        return list(groups.values())

    def answer(self, path: str, q: dict[str, str]) -> bytes:
        key = (path, tuple(sorted((k, v) for k, v in q.items() if k != "timeout")))
        if key not in self.cache:
            self.cache[key] = self._answer(path, q)
        return self.cache[key]

    def _answer(self, path: str, q: dict[str, str]) -> bytes:
        if path == "/api/v1/series":
            doc: dict = {"status": "success", "data": self.series(q)}
        else:
            doc = {"status": "success", "data": {"resultType": "matrix", "result": self.query_range(q)}}
        return json.dumps(doc).encode()


def respond(body: bytes, status: str = "200 OK", ctype: str = "application/json") -> Handler:
    def h(s: socket.socket) -> None:
        s.sendall(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                  "Connection: close\r\n\r\n".encode() + body)
    return h


@contextmanager
def serve(fake: FakeProm) -> Iterator[str]:
    """The fake on 127.0.0.1: its base URL."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    done = threading.Event()

    def one(c: socket.socket) -> None:
        try:
            c.settimeout(30)
            req = b""
            while b"\r\n\r\n" not in req:
                data = c.recv(65536)
                if not data:
                    return
                req += data
            head = req.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
            fake.seen.append((head[0], headers))
            target = head[0].split(" ")[1]
            u = urllib.parse.urlsplit(target)
            q = dict(urllib.parse.parse_qsl(u.query))
            if u.path in fake.routes:
                fake.routes[u.path](c)
            elif u.path in ("/api/v1/series", "/api/v1/query_range"):
                respond(fake.answer(u.path, q))(c)
            else:
                respond(b'{"status":"error","error":"not found"}', "404 Not Found")(c)
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
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        done.set()
        th.join(2)
        srv.close()
