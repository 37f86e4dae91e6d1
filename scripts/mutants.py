"""Plant one-line bugs (mutants) in a copy of the repo, one at a time, and run the fast tests that must catch them.

    python scripts/mutants.py            # every mutant below
    python scripts/mutants.py -k clip    # the mutants whose name contains "clip"
    python scripts/mutants.py --list

The working tree is copied once to a temporary directory (tracked and untracked files, without .git, virtualenvs
and caches; ../shared, the log corpus, is linked beside the copy); each mutant replaces exactly one line there (its
original text must occur exactly once in its file, else the mutant is stale and reported as an error), runs its
tests with the copy first on PYTHONPATH, and puts the line back. A mutant is killed when its tests fail, survived
when they pass; an error (stale line, tests that cannot even be collected) counts as neither. The unmutated copy
runs every listed test first: a failure there stops the run. Exit code 0 when every mutant was killed, 1 otherwise.
Nothing in the working tree is ever written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIP = {".git", ".venv", ".venv-vllm", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
        ".hypothesis", "artifacts", "build", "dist"}


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to the repo
    original: str  # the exact line (without its indentation and newline)
    replacement: str  # what replaces it (indentation is kept)
    tests: tuple[str, ...]  # pytest arguments: files or node ids


SG = "src/kvplan/simulate/policy/sglang.py"
SG_RESERVE = "src/kvplan/simulate/policy/sglang_reserve.py"
SG_TESTS = ("tests/simulate/test_sglang_policy.py",)
VL_TESTS = ("tests/simulate/test_vllm_policy.py",)
KV = "src/kvplan/diagnose/rules/kv_capacity.py"
RULE_TESTS = ("tests/diagnose/test_rule_edges.py", "tests/diagnose/test_classify.py")

MUTANTS = (
    # the planted bugs of issue #30 that no fast test caught
    Mutant("sglang-admission-strict", SG, "if total >= rem_total:", "if total > rem_total:", SG_TESTS),
    Mutant("sglang-candidate-unclipped", SG, "total = ext + (left if left < clip else clip)", "total = ext + left",
           SG_TESTS),
    Mutant("sglang-batch-reserve-unclipped", SG, "done, reserve = True, min(r.max_new, clip)",
           "done, reserve = True, r.max_new", SG_TESTS),
    Mutant("sglang-running-reserve-unclipped", SG_RESERVE, "if step < u:", "if False:", SG_TESTS),
    Mutant("sglang-no-new-token-ratio", SG, "rem_total = avail - self.res.remaining(self.step) * self.ratio",
           "rem_total = avail - self.res.remaining(self.step)", SG_TESTS),
    Mutant("vllm-no-full-sequence-gate", "src/kvplan/simulate/policy/vllm.py",
           "upto = r.fill_len if k.full_sequence_gate else dev + n", "upto = dev + n", VL_TESTS),
    Mutant("vllm-gate-version-off", "src/kvplan/simulate/policy/vllm_knobs.py",
           "return Version(self.version) >= Version(FULL_ISL_SINCE)", "return False", VL_TESTS),
    Mutant("kv-capacity-mean-095", KV, "FULL_MEAN, FULL_PEAK, EDGE = 0.85, 0.90, 0.90",
           "FULL_MEAN, FULL_PEAK, EDGE = 0.95, 0.90, 0.90", RULE_TESTS),
    Mutant("kv-capacity-peak-095", KV, "FULL_MEAN, FULL_PEAK, EDGE = 0.85, 0.90, 0.90",
           "FULL_MEAN, FULL_PEAK, EDGE = 0.85, 0.95, 0.90", RULE_TESTS),
    Mutant("kv-capacity-queue-strict", KV, "waiting = (w.queued or 0) >= 1", "waiting = (w.queued or 0) > 1",
           RULE_TESTS),
    Mutant("kv-capacity-edge-one-running", KV, "if not waiting and w.usage >= EDGE and w.running >= 2 and room is "
           "not None:", "if not waiting and w.usage >= EDGE and w.running >= 1 and room is not None:", RULE_TESTS),
    Mutant("window-preemptions-ignored", "src/kvplan/diagnose/window.py",
           'w.preemptions = int(sum(_vals(samples, "preemptions")))', "w.preemptions = 0", RULE_TESTS),
)


def copy_tree(dst: Path) -> None:
    """The working tree as it is (uncommitted and untracked files too), without .git, venvs and caches; the shared
    log corpus the tests read from ../shared is linked beside the copy (read only: never mutated)."""
    shutil.copytree(REPO, dst, symlinks=True, ignore=lambda _d, names: [n for n in names if n in SKIP])
    shared = REPO.parent / "shared"
    if shared.is_dir():
        (dst.parent / "shared").symlink_to(shared, target_is_directory=True)


def run_tests(root: Path, tests: tuple[str, ...], timeout: float) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = f"{root / 'src'}{os.pathsep}{root}"
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
           "-m", "not slow and not solo", *tests]
    try:
        p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:g} s"
    lines = [x for x in (p.stdout + p.stderr).splitlines() if x.strip()]
    return p.returncode, lines[-1] if lines else ""


def apply(root: Path, m: Mutant) -> str | None:
    """Replace the mutant's line in the copy; the original text, or None when the line is not there exactly once."""
    path = root / m.file
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip() == m.original]
    if len(hits) != 1:
        return None
    i = hits[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + m.replacement + "\n"
    path.write_text("".join(lines))
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", default="", help="only the mutants whose name contains this")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--timeout", type=float, default=600.0, help="per test run, seconds (600)")
    a = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if a.k in m.name]
    if a.list:
        for m in chosen:
            print(f"{m.name}: {m.file}: {m.original!r} -> {m.replacement!r}")
        return 0
    if not chosen:
        print(f"no mutant matches {a.k!r}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kvplan-mutants-") as tmp:
        root = Path(tmp) / "repo"
        copy_tree(root)
        tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
        code, last = run_tests(root, tests, a.timeout)
        if code != 0:
            print(f"the unmutated copy fails its tests ({last}): fix that first", file=sys.stderr)
            return 2
        print(f"unmutated copy: {last}")
        results = []
        for m in chosen:
            t0 = time.monotonic()
            original = apply(root, m)
            if original is None:
                verdict, last = "ERROR", f"line not found exactly once in {m.file}: {m.original!r}"
            else:
                try:
                    code, last = run_tests(root, m.tests, a.timeout)
                finally:
                    (root / m.file).write_text(original)
                verdict = {0: "SURVIVED", 1: "killed"}.get(code, "ERROR")
            results.append(verdict)
            print(f"{verdict:8s} {m.name:34s} {time.monotonic() - t0:5.1f} s  {last}", flush=True)
    killed = results.count("killed")
    print(f"{killed}/{len(results)} mutants killed" + ("" if killed == len(results) else
                                                      f"; {len(results) - killed} survived or errored"))
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
