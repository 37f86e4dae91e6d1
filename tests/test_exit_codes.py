"""Exit codes: every subcommand's --help has its table, the README's table lists the same codes, and the codes the
code returns are the ones documented (issue #12)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvplan.cli.main import SUBCOMMANDS, build_parser
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def _help(cmd: str) -> str:
    parser = build_parser((cmd,))
    sub = next(a for a in parser._actions if a.dest == "cmd")
    return sub.choices[cmd].format_help()  # type: ignore[union-attr]


def _help_codes(cmd: str) -> set[str]:
    text = _help(cmd)
    assert "exit codes:" in text, cmd
    table = text.split("exit codes:", 1)[1]
    return set(re.findall(r"^  (\d+|N)\s", table, re.M))


def _readme_codes() -> dict[str, set[str]]:
    text = (ROOT / "README.md").read_text()
    table = text.split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    out: dict[str, set[str]] = {}
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        codes = {str(i) for i, c in enumerate(cells[1:4]) if c and c != "—"}
        codes |= set(re.findall(r"\b(\d{1,3}|N)\b (?=\w)", cells[4]))
        for name in re.findall(r"`(\w+)`", cells[0]):
            out[name] = codes
    return out


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_help_and_readme_list_the_same_codes(cmd):
    readme = _readme_codes()
    assert cmd in readme, f"README exit-code table lacks {cmd}"
    assert _help_codes(cmd) == readme[cmd], cmd


def test_check_exit_1_on_an_error_finding_and_0_otherwise():
    assert run_cli(["check", "--example"])[0] == 1  # the README's incident: host-oversubscribed (error)
    code, _, err = run_cli(["check", "--gpu", "h100", "--host-mem-gib", "1024", "--", "python", "-m",
                            "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"])
    assert code == 0, err


def test_bad_usage_is_2():
    assert run_cli(["check", "--gpu-mem-mib", "-5", "--", "vllm", "serve", "Qwen/Qwen3-8B"])[0] == 2
    assert run_cli(["diagnose"])[0] == 2


PIPED = [
    (["check", "--example"], 1),  # the verdict's code (fail)
    (["check", "--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen3-8B"], 0),
    (["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "h100"], 0),
    (["gpus"], 0),
    (["models"], 0),
    (["simulate", "--gpu", "h100", "--requests", "20", "--prompt-len", "100", "--output-len", "50", "--concurrency",
      "4", "--", "vllm", "serve", "Qwen/Qwen3-8B"], 0),
    (["tune", "--gpu", "h100", "--requests", "20", "--prompt-len", "100", "--output-len", "50", "--concurrency",
      "4", "--", "vllm", "serve", "Qwen/Qwen3-8B"], 0),
]


@pytest.mark.parametrize("args,code", PIPED, ids=[" ".join(a[:2]) for a, _ in PIPED])
@pytest.mark.parametrize("json_out", [False, True])
def test_a_closed_pipe_is_no_error(args, code, json_out):
    # `kvplan ... | head`: the reader is gone before kvplan writes (its end of the pipe closed at once, so every
    # write fails with EPIPE whatever the output's size): the command's own code, nothing on stderr
    import subprocess
    import sys

    if json_out:
        args = [*args[:1], "--json", *args[1:]]
    p = subprocess.Popen([sys.executable, "-m", "kvplan", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == code, err
    assert "Traceback" not in err and "internal error" not in err, err


def test_the_readme_states_the_pipe_rule():
    text = (ROOT / "README.md").read_text().split("### Exit codes", 1)[1]
    assert "closed output pipe" in text
