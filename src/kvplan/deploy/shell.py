"""Find the engine launch inside shell text or a token list, without running anything.

Shell text is only tokenised (``kvplan.shellwords``: ``shlex``'s words, in time linear in the text): line
continuations joined, comments dropped, commands split at ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines,
``export K=V`` / ``K=V`` lines remembered as environment, and quoted scripts (``bash -c "..."``) searched too.
Variables are substituted from the environment the file itself sets (``$VAR``, ``${VAR}``, ``${VAR:-default}``;
Kubernetes ``$(VAR)``); anything else stays literal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from kvplan import shellwords
from kvplan.errors import KvplanError

MAX_TOKENS = 20_000  # a launch command is a few hundred tokens; refuse to scan pathological text
MAX_DEPTH = 3  # bash -c "sh -c '...'" nesting searched
_WINDOW = 64  # words looked at for the program where a launch may start (env prefixes, wrappers, the program)
_LONG = 4096  # characters of a word kept for that test (no program name is longer)

_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPERATORS = {";", "&&", "||", "|", "&", ";;", "|&"}
_SHELL_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass
class Found:
    """An engine launch found in text: its tokens (env prefixes first) and what was assumed."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # exported before it / prefixed to it
    unresolved: list[str] = field(default_factory=list)  # variables left literal


def substitute(text: str, env: Mapping[str, str], k8s: bool = False, missing: list[str] | None = None) -> str:
    """``$VAR`` / ``${VAR:-default}`` (and ``$(VAR)`` for Kubernetes) from ``env``; unknown ones stay."""

    def shell(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        if name in env:
            return env[name]
        if m.group(2) is not None:
            return str(m.group(2))
        if missing is not None:
            missing.append(name)
        return str(m.group(0))

    def kube(m: re.Match[str]) -> str:
        if m.group(1) in env:
            return env[m.group(1)]
        if missing is not None:
            missing.append(m.group(1))
        return str(m.group(0))

    out = _K8S_VAR.sub(kube, text) if k8s else text
    return _SHELL_VAR.sub(shell, out)


def launch_start(tokens: list[str]) -> int | None:
    """Index where an engine launcher starts in ``tokens`` (wrappers like ``srun ...``, ``uv run``,
    ``numactl ...`` or a venv path before it are skipped), by asking each registered engine."""
    from kvplan.engines import detect_engine, split_command

    for i, tok in enumerate(tokens):
        if tok.startswith("-") or _ASSIGN.match(tok) or any(c in tok for c in " \n\t"):
            continue  # a whole script in one argument is searched as a script (find_in_tokens)
        try:  # the program is in the first words (after env prefixes and wrappers): a window keeps this linear;
            # an over-long word there is cut for this test (planning the launch refuses it with its own line)
            detect_engine(split_command([t[:_LONG] for t in tokens[i:i + _WINDOW]]))
        except KvplanError:
            continue
        return i
    return None


def _commands(text: str) -> Iterator[list[str]]:
    """Simple commands of a shell script, as token lists."""
    joined = re.sub(r"\\\r?\n", " ", text)
    for line in joined.splitlines():
        cur: list[str] = []
        try:
            for tok, op in shellwords.tokens(line, operators=True, comments=True):
                if op and tok in _OPERATORS:
                    if cur:
                        yield cur
                    cur = []
                else:
                    cur.append(tok)
        except ValueError:  # unbalanced quotes on this line: take it whitespace-split
            cur = line.split()
        if cur:
            yield cur


def split_words(text: str, where: str) -> list[str]:
    """Words of one command written as a string (Compose ``command: ...``), as a shell splits them."""
    try:
        return shellwords.split(text)
    except ValueError as e:
        raise KvplanError(f"{where}: cannot split {text[:60]!r}: {e}") from None


def find_in_tokens(tokens: list[str], env: Mapping[str, str], depth: int = 0) -> Found | None:
    """The launch in one simple command (or in a script passed to ``sh -c``)."""
    if len(tokens) > MAX_TOKENS:
        return None
    start = launch_start(tokens)
    if start is not None:
        prefix = {t.split("=", 1)[0]: t.split("=", 1)[1] for t in tokens[:start] if _ASSIGN.match(t)}
        own = [f"{k}={v}" for k, v in prefix.items()]
        return Found(argv=own + tokens[start:], env={**env, **prefix})
    if depth >= MAX_DEPTH:
        return None
    for tok in tokens:  # a script in one argument: bash -c "python3 -m ... --tp 8"
        if any(c in tok for c in " \n\t"):
            hit = find_in_script(tok, env, depth + 1)
            if hit is not None:
                return hit
    return None


def find_in_script(text: str, env: Mapping[str, str] | None = None, depth: int = 0,
                   k8s: bool = False) -> Found | None:
    """The first engine launch in a shell script; ``export`` lines before it become its environment."""
    scope = dict(env or {})
    missing: list[str] = []
    for cmd in _commands(text):
        words = [substitute(t, scope, k8s, missing) for t in cmd]
        if words and words[0] == "export":
            words = words[1:]
        if words and all(_ASSIGN.match(w) for w in words):  # FOO=bar / export FOO=bar
            scope.update((k, v) for k, _, v in (w.partition("=") for w in words))
            continue
        hit = find_in_tokens(words, scope, depth)
        if hit is not None:
            left = set(missing) | set(hit.unresolved)  # only what the launch itself still shows
            hit.unresolved = sorted(v for v in left if any(f"${v}" in t or f"${{{v}" in t or f"$({v})" in t
                                                           for t in hit.argv))
            return hit
    return None
