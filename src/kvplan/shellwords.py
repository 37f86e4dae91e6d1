"""Shell words of untrusted text, in time linear in its length: what ``shlex.split`` (POSIX mode) returns.

``shlex`` reads one character at a time and grows each token by string concatenation (``self.token += c``): one
1.5 MB token in a ``docker run`` line took 50 s. Here runs of ordinary characters are taken by one regular
expression match and a token's parts are joined once, so the cost is linear in the text.

Semantics kept from ``shlex`` (POSIX mode, ``whitespace_split``): words split at space, tab, CR and LF; ``'...'``
literal; ``"..."`` with backslash escaping only ``"`` and ``\\`` (any other backslash is kept); an unquoted backslash
takes the next character literally (a backslash-newline gives a newline, as ``shlex`` does); quoted parts join the
word around them (``a"b c"d`` is ``ab cd``); ``''`` is an empty word; an unterminated quote or a trailing backslash is
``ValueError`` ("No closing quotation" / "No escaped character"). With *operators*, runs of ``;``, ``&`` and ``|``
are words of their own, as with ``punctuation_chars=";&|"``. With *comments*, ``#`` starts a comment where a word
could start, as in a shell; ``shlex`` also cuts a word at a ``#`` inside it (``a#b``), which a shell does not.
``tests/test_shellwords.py`` checks the equivalence with ``shlex`` on a corpus of launch commands and random text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_WS = " \t\r\n"
_OPS = ";&|"
_PLAIN = re.compile(r"[^ \t\r\n'\"\\]+")
_PLAIN_OPS = re.compile(r"[^ \t\r\n'\"\\;&|]+")
_OP_RUN = re.compile(r"[;&|]+")
_WS_RUN = re.compile(r"[ \t\r\n]+")
_DQ_STOP = re.compile(r"[\"\\]")


def tokens(text: str, operators: bool = False, comments: bool = False) -> Iterator[tuple[str, bool]]:
    """(word, is_operator) of *text*; see the module docstring. ``ValueError`` as ``shlex`` raises it."""
    plain = _PLAIN_OPS if operators else _PLAIN
    parts: list[str] = []
    in_word = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _WS:
            if in_word:
                yield "".join(parts), False
                parts, in_word = [], False
            m = _WS_RUN.match(text, i)
            i = m.end() if m else i + 1
        elif comments and c == "#" and not in_word:
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif operators and c in _OPS:
            if in_word:
                yield "".join(parts), False
                parts, in_word = [], False
            m = _OP_RUN.match(text, i)
            assert m is not None
            yield m.group(), True
            i = m.end()
        elif c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                raise ValueError("No closing quotation")
            parts.append(text[i + 1:j])
            in_word, i = True, j + 1
        elif c == '"':
            in_word, i = True, i + 1
            while True:
                m = _DQ_STOP.search(text, i)
                if m is None:
                    raise ValueError("No closing quotation")
                j = m.start()
                parts.append(text[i:j])
                if text[j] == '"':
                    i = j + 1
                    break
                if j + 1 >= n:
                    raise ValueError("No escaped character")
                nxt = text[j + 1]
                parts.append(nxt if nxt in '"\\' else "\\" + nxt)
                i = j + 2
        elif c == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            parts.append(text[i + 1])
            in_word, i = True, i + 2
        else:
            m = plain.match(text, i)
            assert m is not None
            parts.append(m.group())
            in_word, i = True, m.end()
    if in_word:
        yield "".join(parts), False


def split(text: str, comments: bool = False) -> list[str]:
    """``shlex.split(text, comments=comments)``, linear in the text (see the module docstring)."""
    return [w for w, _op in tokens(text, comments=comments)]
