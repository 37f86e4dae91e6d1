"""A Prometheus HTTP API answer read as it streams in: the elements of its one big array, one at a time.

    {"status": "success", "data": {"resultType": "matrix", "result": [ELEMENT, ELEMENT, ...]}}   (query_range)
    {"status": "success", "data": [ELEMENT, ...]}                                              (series)

:class:`ArrayStream` is fed the body chunk by chunk and hands each element of the array at ``path`` (``("data",
"result")`` or ``("data",)``) to ``on_element`` as soon as it is complete, parsed alone (``json.raw_decode``), then
drops it: memory is one element whatever the answer's size. What comes before the array (``status``,
``resultType``) is read from a prefix of at most ``MAX_PREFIX`` characters; what comes after it is not read.

Bounded against a hostile answer: an element longer than ``max_element`` characters, a prefix longer than
``MAX_PREFIX``, JSON nested too deeply, a ``status`` other than ``"success"`` or no such array are a
:class:`PromJsonError` (one line). A partial element is parsed again only when its text has doubled since the last
try, so a server that drips one byte at a time costs linear time, not quadratic.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from typing import Any

MAX_PREFIX = 64 << 10
MAX_ELEMENT = 1 << 20
_WS = " \t\r\n"
_DECODER = json.JSONDecoder()


class PromJsonError(Exception):
    """The answer is not a Prometheus API answer of the expected shape (one line)."""


class _More(Exception):
    """The text so far ends before the next token: wait for more."""


def _skip(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in _WS:
        i += 1
    if i >= n:
        raise _More
    return i


def _value(text: str, i: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, i)
    except json.JSONDecodeError:
        raise _More from None  # at close, a value that never completes is the caller's error
    except RecursionError:
        raise PromJsonError("JSON nested too deeply") from None


class ArrayStream:
    """See the module docstring. ``status`` / ``result_type`` hold what the prefix said; ``elements`` counts."""

    def __init__(self, path: tuple[str, ...], on_element: Callable[[Any], None], max_element: int = MAX_ELEMENT):
        self.path, self.on_element, self.max_element = path, on_element, max_element
        self.status: str | None = None
        self.result_type: str | None = None
        self.error: str | None = None
        self.elements = 0
        self.done = False  # the array's closing bracket was read
        self._text = ""
        self._in_array = False
        self._expect_comma = False
        self._retry_at = 0
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk: bytes) -> None:
        if self.done:
            return  # what follows the array (warnings, infos) is not read
        self._text += self._dec.decode(chunk)
        if len(self._text) < self._retry_at:
            return
        self._run(final=False)

    def close(self) -> None:
        """The answer ended: a missing or unfinished array is an error."""
        if not self.done:
            self._text += self._dec.decode(b"", True)
            self._run(final=True)
        if not self.done:
            if self.error:
                raise PromJsonError(f"Prometheus answered an error: {self.error[:200]}")
            where = ".".join(self.path)
            raise PromJsonError(f"the answer ended before its {where} array did ({self.elements} element(s) read)"
                                if self._in_array else f"no {where} array in the answer")

    # ---- the state machine ----
    def _run(self, final: bool) -> None:
        try:
            if not self._in_array:
                start = self._prefix()
                self._in_array, self._text = True, self._text[start:]
            self._elements()
        except _More:
            if self._in_array:
                if len(self._text) > self.max_element:
                    raise PromJsonError(f"an element of the answer is longer than {self.max_element:,} characters "
                                        "(not what Prometheus sends)") from None
            elif len(self._text) > MAX_PREFIX:
                raise PromJsonError(f"no {'.'.join(self.path)} array in the first {MAX_PREFIX >> 10} KiB of the "
                                    "answer (not a Prometheus API answer)") from None
            self._retry_at = 2 * len(self._text) if not final else 0
            if final:
                return

    def _prefix(self) -> int:
        """Index just past the ``[`` that opens the array at ``path`` (re-read from the start as text arrives)."""
        text, i, depth = self._text, 0, 0
        i = _skip(text, i)
        if text[i] != "{":
            raise PromJsonError("the answer is not a JSON object (not a Prometheus API answer)")
        i += 1
        while True:
            i = _skip(text, i)
            if text[i] == "}":
                raise PromJsonError(f"no {'.'.join(self.path)} array in the answer" +
                                    (f"; Prometheus said: {self.error[:200]}" if self.error else ""))
            if text[i] == ",":
                i = _skip(text, i + 1)
            key, i = _value(text, i)
            i = _skip(text, i)
            if not isinstance(key, str) or text[i] != ":":
                raise PromJsonError("the answer is not a JSON object of named fields")
            i = _skip(text, i + 1)
            if depth == 0 and key == "status" or key == "resultType" or key == "error":
                val, i = _value(text, i)
                if key == "status":
                    self.status = val if isinstance(val, str) else repr(val)[:40]
                elif key == "resultType":
                    self.result_type = val if isinstance(val, str) else None
                else:
                    self.error = val if isinstance(val, str) else repr(val)[:200]
                continue
            if key != self.path[depth]:
                _, i = _value(text, i)  # a field kvplan does not read (bounded by MAX_PREFIX)
                continue
            if self.status != "success":
                raise PromJsonError(f"the answer's status is {self.status!r}, not 'success'" +
                                    (f": {self.error[:200]}" if self.error else ""))
            opener = "[" if depth == len(self.path) - 1 else "{"
            if text[i] != opener:
                raise PromJsonError(f"{'.'.join(self.path[:depth + 1])} is not a JSON "
                                    f"{'array' if opener == '[' else 'object'}")
            i += 1
            if opener == "[":
                return i
            depth += 1

    def _elements(self) -> None:
        text, done = self._text, 0  # done: the text consumed so far (whole elements and their commas)
        try:
            while True:
                i = _skip(text, done)
                if text[i] == "]":
                    self.done = True
                    text, done = "", 0
                    return
                if self._expect_comma:
                    if text[i] != ",":
                        raise PromJsonError(f"expected ',' or ']' after element {self.elements} of the array")
                    i = _skip(text, i + 1)
                el, done = _value(text, i)
                self._expect_comma = True
                self.elements += 1
                self.on_element(el)
        finally:
            self._text = text[done:]
            self._retry_at = 0
