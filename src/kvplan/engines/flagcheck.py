"""Replay of an engine's argument parsing over a launch command's arguments (see flagtable.py for the data).

Models CPython's argparse (3.10-3.12 ``ArgumentParser._parse_optional`` / ``_get_option_tuples`` /
``_get_values``): exact option strings, ``--opt=value``, unique ``--prefix`` abbreviations (``allow_abbrev``),
single-dash options (``-tp 2``, ``-tp=2``, ``-q fp8``), ``type`` conversion then ``choices``; and vLLM's
``FlexibleArgumentParser.parse_args`` rewriting before it. Where a prefix matches several option strings of one
action, newer Pythons accept it; that is not reported (a finding must be an error the engine really raises).
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import json
from typing import Any

from kvplan.engines.flagspec import FlagProblem, FlagSpec, FlagTable, human_int, is_negative_number

_CACHE_MAX = 4096
MAX_SUGGESTED = 16  # distinct unknown flags of one command that get a "did you mean" (difflib: 5-30 ms each)
_CANDIDATES: dict[tuple[str, int], list[str]] = {}
_CLOSEST: dict[tuple[str, int, str], str | None] = {}


class Checker:
    def __init__(self, table: FlagTable, index: int, version: str):
        self.t = table
        self.i = index
        self.version = version
        self.opts = table.options(index)
        self.sorted_opts = sorted(self.opts)
        self.fe = table.front_end(index)
        self.engine = {"sglang": "SGLang", "vllm": "vLLM"}.get(table.engine, table.engine)
        self.asked: set[str] = set()  # distinct names this run asked a suggestion for

    # ---------------------------------------------------------------- front end
    def normalise(self, name: str) -> str:
        """vLLM FlexibleArgumentParser: underscores -> dashes in ``--key`` (up to the first '.')."""
        if self.fe.get("underscores") and name.startswith("--"):
            head, dot, tail = name[2:].partition(".")
            return "--" + head.replace("_", "-") + dot + tail
        return name

    def resolve(self, name: str) -> tuple[str, FlagSpec | None, list[str]]:
        """(how argparse reads ``name``: "exact" | "prefix" | "ambiguous" | "unknown", spec, candidates)."""
        if name in self.opts:
            return "exact", self.opts[name], [name]
        if len(name) < 2:
            return "unknown", None, []
        if name.startswith("--"):
            if not self.fe.get("allow_abbrev", True):
                return "unknown", None, []
            cands = self._starting(name)
        else:  # single dash: "-x" + attached value, or options starting with it
            cands = sorted(set(self._starting(name)) | ({name[:2]} if name[:2] in self.opts else set()))
        specs = {id(self.opts[c]) for c in cands}
        if len(specs) == 1:
            return "prefix", self.opts[cands[0]], cands
        if len(specs) > 1:
            return "ambiguous", None, cands
        return "unknown", None, []

    def _starting(self, prefix: str) -> list[str]:
        lo = bisect.bisect_left(self.sorted_opts, prefix)
        hi = bisect.bisect_left(self.sorted_opts, prefix + "\uffff")
        return self.sorted_opts[lo:hi]

    # ---------------------------------------------------------------- suggestions
    def candidates(self) -> list[str]:
        """Option strings, plus the short forms argparse accepts as unique prefixes ("--tp" for "--tp-size");
        computed once per table and version."""
        key = (self.t.engine, self.i)
        if key not in _CANDIDATES:
            _CANDIDATES[key] = self._candidates()
        return _CANDIDATES[key]

    def _candidates(self) -> list[str]:
        out = set(self.opts)
        if self.fe.get("allow_abbrev", True):
            for o in list(self.opts):
                if o.startswith("--") and "-" in o[2:]:
                    short = o[: o.index("-", 2)]
                    if len(short) >= 4 and self.resolve(short)[0] == "prefix":
                        out.add(short)
        return sorted(out)

    def closest(self, name: str) -> str | None:
        """The nearest option string (difflib), computed once per distinct name: a command that repeats an unknown
        flag 500 times asks difflib once, not 1,000 times (15 s before)."""
        self.asked.add(name)
        if len(self.asked) > MAX_SUGGESTED:
            return None  # a command of hundreds of distinct unknown flags: the rest get no suggestion (bounded time)
        key = (self.t.engine, self.i, name)
        if key not in _CLOSEST:
            if len(_CLOSEST) >= _CACHE_MAX:
                _CLOSEST.clear()
            _CLOSEST[key] = self._closest(name)
        return _CLOSEST[key]

    def _closest(self, name: str) -> str | None:
        pool = self.candidates()
        got = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
        if not got:  # drop the dashes: "-tpp" vs "--tp"
            bare = {c.lstrip("-"): c for c in pool}
            got = [bare[g] for g in difflib.get_close_matches(name.lstrip("-"), list(bare), n=1, cutoff=0.6)]
        return got[0] if got else None

    # ---------------------------------------------------------------- values
    def value_problem(self, spec: FlagSpec, value: str) -> str | None:
        if spec.none_ok and value in ("None", ""):
            return None
        t = spec.type
        conv: Any = value
        try:
            if t == "int":
                conv = int(value)
            elif t == "float":
                conv = float(value)
            elif t in ("human_int", "human_int_or_auto"):
                if not human_int(value, auto=t.endswith("auto")):
                    return f"invalid {t.replace('_', ' ')} value: {value!r}"
                return None
            elif t == "bool":
                if value.lower() not in ("true", "false", "1", "0", "yes", "no", "y", "n", "t", "f", "on", "off"):
                    return f"invalid bool value: {value!r}"
        except ValueError:
            return f"invalid {t} value: {value!r}"
        if spec.choices and (t in (None, "int", "float")):
            if conv not in spec.choices and str(conv) not in {str(c) for c in spec.choices}:
                shown = ", ".join(repr(c) for c in spec.choices if c is not None)
                return f"invalid choice: {value!r} (choose from {shown})"
        return None

    def closest_choice(self, spec: FlagSpec, value: str) -> str | None:
        if not spec.choices:
            return None
        pool = [str(c) for c in spec.choices if c is not None]
        got = difflib.get_close_matches(value, pool, n=1, cutoff=0.8)
        return got[0] if got else None

    # ---------------------------------------------------------------- the scan
    def run(self, args: list[str]) -> list[FlagProblem]:
        out: list[FlagProblem] = []
        i = 0
        while i < len(args):
            tok = args[i]
            if tok == "--":
                break
            if not tok.startswith("-") or tok == "-" or is_negative_number(tok):
                i += 1
                continue
            name, eq, inline = tok.partition("=")
            if self.fe.get("minus_O") and name.startswith("-O") and not name.startswith("--"):
                i += 1 if (len(tok) > 2 or i + 1 >= len(args) or args[i + 1] not in "0123") else 2
                continue
            norm = self.normalise(name)
            if self.fe.get("dotted_json") and norm.startswith("--") and "." in norm:
                norm = norm.split(".", 1)[0].rstrip("+")  # --compilation-config.level 3 -> --compilation-config
                if self.resolve(norm)[1] is not None:  # becomes --compilation-config '{"level": 3}'
                    i += 1 if eq or i + 1 >= len(args) else 2
                    continue
            how, spec, cands = self.resolve(norm)
            start, before = i, len(out)
            i = self._step(args, i, tok, name, eq, inline, how, spec, cands, out)
            for k in range(before, len(out)):
                out[k] = dataclasses.replace(out[k], span=(start, max(i, start + 1)))
        return out

    def _step(self, args: list[str], i: int, tok: str, name: str, eq: str, inline: str, how: str,
              spec: FlagSpec | None, cands: list[str], out: list[FlagProblem]) -> int:
        if how == "ambiguous":
            out.append(FlagProblem("ambiguous", name, inline if eq else None,
                                   f"{self.engine} {self.version}: ambiguous option {name} could match "
                                   f"{', '.join(cands[:6])}{' ...' if len(cands) > 6 else ''}: the server will "
                                   "not start", None, None))
            return i + 1 + self._skip_value(args, i, eq, None)
        if spec is None:
            out.append(self.unknown(args, i, name, eq, inline))
            return i + 1 + self._skip_value(args, i, eq, self._intended_arity(name))
        n, prob = self.values(args, i, name, eq, inline, spec)
        if prob:
            out.append(prob)
        return i + 1 + n

    def _intended_arity(self, name: str) -> Any:
        h = self.t.history.get(name)
        if h:
            return FlagSpec.from_json(h[2]).arity
        guess = self.closest(self.normalise(name))
        spec = self.resolve(guess)[1] if guess else None
        return spec.arity if spec is not None else None

    @staticmethod
    def _skip_value(args: list[str], i: int, eq: str, arity: Any) -> int:
        """Tokens after args[i] that belong to it (its value), as argparse would consume them."""
        if eq or arity == 0:
            return 0
        n = 0
        limit = 1 if arity in (None, "?") else (arity if isinstance(arity, int) else len(args))
        while n < limit and i + 1 + n < len(args):
            nxt = args[i + 1 + n]
            if nxt.startswith("-") and nxt != "-" and not is_negative_number(nxt):
                break
            n += 1
        return n

    def values(self, args: list[str], i: int, name: str, eq: str, inline: str,
               spec: FlagSpec) -> tuple[int, FlagProblem | None]:
        arity = spec.arity
        canon = spec.name
        if arity == 0:
            if eq and spec.action not in ("?",):
                fixed: list[str] | None = args[:i] + [name] + args[i + 1:]
                return 0, FlagProblem("bad-value", name, inline,
                                      f"{self.engine} {self.version}: {name} takes no value (argument {canon}: "
                                      f"ignored explicit argument {inline!r}): the server will not start",
                                      canon, fixed, canon)
            return 0, None
        if arity == "?" and not eq:
            return self._skip_value(args, i, eq, "?"), None
        vals = [inline] if eq else args[i + 1: i + 1 + self._skip_value(args, i, eq, arity)]
        need_one = arity in (None, "+") or isinstance(arity, int)
        if eq and isinstance(arity, int) and arity > 1:
            return 0, None
        if need_one and not vals:
            return 0, FlagProblem("bad-value", name, None, f"{self.engine} {self.version}: {name} expects "
                                  f"{'a value' if arity in (None, 1) else 'values'}: the server will not start",
                                  None, None, canon)
        used = 0 if eq else len(vals)
        for v in vals:
            msg = self.value_problem(spec, v)
            if msg:
                best = self.closest_choice(spec, v)
                fixed = None
                if best is not None:
                    pos = i + 1 + vals.index(v)
                    fixed = (args[:i] + [f"{name}={best}"] + args[i + 1:]) if eq else \
                        (args[:pos] + [best] + args[pos + 1:])
                return used, FlagProblem("bad-value", name, v, f"{self.engine} {self.version}: argument "
                                         f"{'/'.join(spec.opts[:3])}: {msg}: the server will not start", best, fixed,
                                         canon)
        return used, None

    def unknown(self, args: list[str], i: int, name: str, eq: str, inline: str) -> FlagProblem:
        norm = self.normalise(name)
        hist = self.t.history.get(norm)
        value = inline if eq else None
        span = 1 + self._skip_value(args, i, eq, self._intended_arity(name))
        dropped = args[:i] + args[i + span:]
        if hist and hist[1] < self.i:  # gone
            gone = self.t.versions[hist[1] + 1]
            last = self.t.versions[hist[1]]
            info = self.t.removed.get(norm, {})
            repl = info.get("replaced_by")
            repl = repl if repl and self.resolve(repl)[1] is not None else None
            note = f"; {info['note']}" if info.get("note") else ""
            return FlagProblem("removed", name, value,
                               f"{self.engine} {self.version} has no {name}: removed in {gone} (last in {last})"
                               f"{note}: the server will not start", repl, dropped, repl)
        if hist and hist[0] > self.i:  # not yet
            first = self.t.versions[hist[0]]
            return FlagProblem("unknown", name, value,
                               f"{self.engine} {self.version} does not know {name} yet (added in {first}): the "
                               "server will not start", None, dropped)
        best = self.closest(norm)
        fixed = None
        if best is not None:
            fixed = args[:i] + ([f"{best}={inline}"] if eq else [best]) + args[i + 1:]
        hint = f"; did you mean {best}?" if best else ""
        full = self.resolve(best)[1] if best else None
        if best and full is not None and full.name != best:
            hint = f"; did you mean {best} ({full.name})?"
        return FlagProblem("unknown", name, value,
                           f"{self.engine} {self.version} does not accept {name} (unrecognized arguments){hint} "
                           "The server will not start.", best, fixed)


def dumps(problems: list[FlagProblem]) -> str:  # debugging aid
    return json.dumps([p.__dict__ for p in problems], indent=1)
