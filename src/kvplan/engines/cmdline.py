"""A launch command as the user typed it: env-var prefix, program, and flags.

Flags are matched the way the engines' argparse does it: ``--flag value`` and ``--flag=value``, and
unique prefixes (argparse's ``allow_abbrev``). Flags kvplan does not know are kept, never dropped.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kvplan.errors import KvplanError

_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# shlex.split (posix, no comments) of a text without quotes and backslashes: the runs of non-whitespace (shlex's
# whitespace: space, tab, CR, LF)
_SHLEX_SPECIAL = re.compile(r"[\"'\\]")
_SHLEX_WORD = re.compile(r"[^ \t\r\n]+")
_WRAPPERS = {"env", "nohup", "exec", "time", "sudo", "-E"}


@dataclass(frozen=True)
class LaunchCommand:
    argv: tuple[str, ...]  # the command as given (tokens)
    env: dict[str, str]  # VAR=value prefixes
    program: tuple[str, ...]  # e.g. ("python", "-m", "sglang.launch_server") or ("vllm", "serve")
    args: tuple[str, ...]  # everything after the program

    def text(self) -> str:
        return self._text

    @cached_property
    def _text(self) -> str:  # the command's one text (an evaluation's key): quoted once per command
        return " ".join(shlex.quote(a) for a in self.argv)

    def runs(self, modules: Sequence[str], cli: str) -> bool:
        """True for ``python -m <one of modules>`` or ``<cli> serve``."""
        prog = self.program
        if len(prog) == 3 and prog[1] == "-m":
            return prog[2] in modules
        return len(prog) == 2 and prog[0].rsplit("/", 1)[-1] == cli and prog[1] == "serve"


def tokenize(command: Sequence[str] | str) -> list[str]:
    """Split a command given as one string or as argv; drop line continuations."""
    from kvplan import shellwords, validate

    if isinstance(command, str):
        validate.text("the launch command", command, max_len=validate.MAX_COMMAND)
        if not _SHLEX_SPECIAL.search(command):  # no quote, no escape: shlex.split is a split on its whitespace
            tokens = _SHLEX_WORD.findall(command)
        else:
            try:
                tokens = shellwords.split(command)
            except ValueError as e:
                raise KvplanError(f"cannot split the launch command: {e}", "check its quotes") from None
    else:
        if not isinstance(command, (list, tuple)):
            raise KvplanError(f"a launch command is a string or a list of strings, got {type(command).__name__}")
        tokens = list(command)
        if len(tokens) == 1 and isinstance(tokens[0], str) and " " in tokens[0].strip():
            return tokenize(tokens[0])
    if len(tokens) > validate.MAX_COMMAND_WORDS:
        raise KvplanError(f"the launch command has {len(tokens):,} words (at most {validate.MAX_COMMAND_WORDS:,})",
                          "no launch command is that long")
    for i, t in enumerate(tokens):
        validate.text(f"word {i + 1} of the launch command", t, max_len=validate.MAX_ARG,
                      hint="Linux passes at most 128 KiB per argument (MAX_ARG_STRLEN)" if isinstance(t, str) else None)
    return [t for t in tokens if t not in ("\\", "\\\n", "") and t.strip() != "\\"]


def split_command(command: Sequence[str] | str, clis: Sequence[str] = ()) -> LaunchCommand:
    """Separate env prefixes and wrappers from the program and its flags; ``clis``: programs whose first word is a
    subcommand (``sglang serve``, ``vllm serve``; kvplan.engines.split_command passes every engine's)."""
    tokens = tokenize(command)
    if not tokens:
        raise KvplanError("empty launch command", "give it after --, e.g. -- python -m sglang.launch_server ...")
    env: dict[str, str] = {}
    i = 0
    while i < len(tokens) and (_ENV_RE.match(tokens[i]) or tokens[i] in _WRAPPERS):
        if _ENV_RE.match(tokens[i]):
            k, v = tokens[i].split("=", 1)
            env[k] = v
        i += 1
    rest = tokens[i:]
    if not rest:
        raise KvplanError("the launch command has only environment variables", "add the engine command")
    prog_len = 1
    exe = rest[0].rsplit("/", 1)[-1]
    if re.fullmatch(r"python[0-9.]*", exe) and len(rest) >= 3 and rest[1] == "-m":
        prog_len = 3
    elif exe in clis and len(rest) >= 2 and not rest[1].startswith("-"):
        prog_len = 2  # `sglang serve`, `vllm serve`
    return LaunchCommand(argv=tuple(tokens), env=env, program=tuple(rest[:prog_len]), args=tuple(rest[prog_len:]))


@dataclass(frozen=True)
class Flag:
    """One engine flag: canonical name, aliases, kind ("bool", "int", "float", "str", "list": argparse
    ``nargs="*"``, the words up to the next flag, kept as a tuple of strings), dest."""

    name: str
    kind: str = "str"
    aliases: tuple[str, ...] = ()
    dest: str = ""

    @cached_property
    def key(self) -> str:
        return self.dest or self.name.lstrip("-").replace("-", "_")


@dataclass
class ParsedFlags:
    values: dict[str, Any] = field(default_factory=dict)
    positionals: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # flags as written
    seen: dict[str, str] = field(default_factory=dict)  # dest -> flag as written


def _convert(flag: Flag, raw: str, written: str) -> object:
    try:
        if flag.kind == "int":
            return int(raw)
        if flag.kind == "float":
            return float(raw)
    except ValueError:
        raise KvplanError(f"{written} expects a{'n integer' if flag.kind == 'int' else ' number'}, got {raw!r}",
                          "fix the value in the launch command") from None
    return raw


def parse_flags(args: Sequence[str], flags: Sequence[Flag], abbrev: bool = True) -> ParsedFlags:
    """Parse ``args`` against a flag table; unknown flags are kept (with their value, if any)."""
    table, names = _table(flags)
    out = ParsedFlags()
    i = 0
    while i < len(args):
        tok = args[i]
        short = tok.startswith("-") and not tok.startswith("--") and tok.partition("=")[0] in table  # e.g. -tp 8
        if (not tok.startswith("--") and not short) or tok == "--":
            out.positionals.append(tok)
            i += 1
            continue
        name, eq, inline = tok.partition("=")
        norm = name if name in table else name.replace("_", "-")  # vllm also accepts underscores
        flag = table.get(norm)
        if flag is None and abbrev and not short:
            cands = {table[n].key: table[n] for n in names if n.startswith(norm)}
            if len(cands) == 1:
                flag = next(iter(cands.values()))
        if flag is None:
            out.unknown.append(name)
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
                i += 1  # its value
            i += 1
            continue
        if flag.kind == "bool":
            out.values[flag.key] = True if not eq else inline.lower() not in ("false", "0", "no")
            i += 1
        elif flag.kind == "list":
            words = [inline] if eq else []
            while not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
                words.append(args[i + 1])
                i += 1
            out.values[flag.key] = tuple(words)
            i += 1
        else:
            if eq:
                raw = inline
            elif i + 1 < len(args):
                raw = args[i + 1]
                i += 1
            else:
                raise KvplanError(f"{name} needs a value", "complete the launch command")
            out.values[flag.key] = _convert(flag, raw, name)
            i += 1
        out.seen[flag.key] = name
    return out


def _table(flags: Sequence[Flag]) -> tuple[dict[str, Flag], list[str]]:
    """Every name and alias of a flag table -> its Flag, and the names sorted; built once per table (the engines'
    tables are module constants)."""
    hit = _TABLES.get(id(flags))
    if hit is None or hit[0] is not flags:
        table: dict[str, Flag] = {}
        for f in flags:
            for n in (f.name, *f.aliases):
                table[n] = f
        if len(_TABLES) >= 64:
            _TABLES.clear()
        hit = _TABLES[id(flags)] = (flags, table, sorted(table), {f.key: f for f in flags})
    return hit[1], hit[2]


def _by_key(flags: Sequence[Flag]) -> dict[str, Flag]:
    """A flag table's canonical key -> its Flag (the last one of a key wins), built once per table."""
    _table(flags)
    return _TABLES[id(flags)][3]


_TABLES: dict[int, tuple[Sequence[Flag], dict[str, Flag], list[str], dict[str, Flag]]] = {}


def flags_from_values(items: Iterable[tuple[str, Any]], flags: Sequence[Flag],
                      keys: Collection[str] | None = None) -> list[str]:
    """Launch flags for values a log showed under the flags' keys (``tp_size=4`` -> ``--tp-size 4``), in order:
    booleans as bare flags when true; nested dicts, lists and repr-like strings skipped; ``keys``: only these."""
    known = {f.key: f for f in flags}
    out: list[str] = []
    for key, val in items:
        f = known.get(key)
        if f is None or val is None or (keys is not None and key not in keys) or (isinstance(val, str)
                                                                                   and val[:1] in "{[<"):
            continue
        if f.kind == "bool":
            if val is True:
                out.append(f.name)
        elif not isinstance(val, (dict, list, tuple)):
            out += [f.name, str(val)]
    return out


def rewrite_flags(cmd: LaunchCommand, changes: dict[str, str | None], flags: Sequence[Flag]) -> list[str]:
    """The command's tokens with flags changed in place (or appended); None removes a flag.

    ``changes`` maps a canonical flag name (``--hicache-size``) to its new value; "" sets a boolean flag.
    """
    by_name, canon = _table(flags)[0], _by_key(flags)  # read only: shared by every call on this table
    # flags kvplan does not model are matched as written (a misspelt or removed flag the engine would reject)
    literal = {k: v for k, v in changes.items() if k.startswith("-") and k not in by_name
               and any(t == k or t.startswith(k + "=") for t in cmd.args)}
    changes = {k: v for k, v in changes.items() if k not in literal}
    want = {by_name[k].key if k in by_name else k: v for k, v in changes.items()}
    prefix = list(cmd.argv[: len(cmd.argv) - len(cmd.args)])
    out: list[str] = []
    done: set[str] = set()
    args = list(cmd.args)
    i = 0
    while i < len(args):
        tok = args[i]
        name, eq, _ = tok.partition("=")
        if name in literal:
            i += _rewrite_literal(args, i, literal[name], out)
            continue
        f = by_name.get(name) or by_name.get(name.replace("_", "-"))
        if f is None or f.key not in want:
            out.append(tok)
            i += 1
            continue
        has_value = f.kind != "bool" and not eq and i + 1 < len(args)
        if f.kind == "list" and not eq:  # every word of it up to the next flag
            while i + 2 < len(args) and not args[i + 2].startswith("-"):
                i += 1
        new = want[f.key]
        if new is not None and f.key not in done:
            out.extend([name] if f.kind == "bool" else [f"{name}={new}"] if eq else [name, new])
        done.add(f.key)
        i += 2 if has_value else 1
    for key, new in want.items():
        if key in done or new is None:
            continue
        f = canon.get(key)
        flag = f.name if f else key
        out.extend([flag] if (f and f.kind == "bool") or new == "" else [flag, new])
    return prefix + out


def _rewrite_literal(args: list[str], i: int, new: str | None, out: list[str]) -> int:
    """Rewrite the flag at args[i] as written; returns the tokens consumed. ``new``: None drops the flag and
    its value (the next token when it is not a flag), "--other" renames it in place keeping its value, "" drops
    an inline ``=value``, anything else replaces the value."""
    name, eq, inline = args[i].partition("=")
    has_next = not eq and i + 1 < len(args) and not args[i + 1].startswith("-")
    if new is None:
        return 2 if has_next else 1
    if new.startswith("-"):
        out.append(f"{new}={inline}" if eq else new)
        return 1
    if new == "":
        out.append(name)
        return 1
    if eq:
        out.append(f"{name}={new}")
        return 1
    out.extend([name, new])
    return 2 if has_next else 1
