"""Prometheus text pages, parsed in linear time and summarised while they stream in.

A scrape keeps no page and no series: :class:`PageSummary` is fed the body chunk by chunk and keeps, for the metric
names kvplan reads, the sum and the maximum over label sets (DP ranks / engines add up), plus the labels of the
first sample of the few info metrics (``vllm:cache_config_info``). Only lines that start with one of the engines'
metric-name prefixes (``MetricNames.prefix``) are read. Memory is a few KiB whatever the page size.

Every value is checked: a sample that is not a finite number >= 0 (Prometheus allows ``NaN`` and ``+Inf``; a
hostile or broken server sends anything) is counted in ``ignored`` and left out; lines longer than
``MAX_LINE`` are skipped. No regular expression here can backtrack: names, labels and values are split by hand.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

MAX_LINE = 64 << 10
MAX_LABELS = 64


_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _close_brace(line: str, start: int) -> int:
    """Index of the ``}`` that ends the labels opened at *start* (quotes and escapes respected), or -1."""
    j = line.find("}", start)
    if j < 0:
        return -1
    seg = line[start:j]
    if "\\" not in seg and seg.count('"') % 2 == 0:
        return j  # the common case, at C speed
    quoted, esc = False, False
    for k in range(start, len(line)):
        c = line[k]
        if esc:
            esc = False
        elif c == "\\":
            esc = True
        elif c == '"':
            quoted = not quoted
        elif c == "}" and not quoted:
            return k
    return -1


def split_sample(line: str) -> tuple[str, str, str] | None:
    """(name, label text, value text) of one sample line, or None. Linear in the line's length."""
    line = line.strip()
    if not line or line[0] == "#":
        return None
    m = _NAME.match(line)
    if not m:
        return None
    name, i, labels = m.group(0), m.end(), ""
    if line[i:i + 1] == "{":
        j = _close_brace(line, i + 1)
        if j < 0:
            return None
        labels, i = line[i + 1:j], j + 1
    if i < len(line) and not line[i].isspace():
        return None
    rest = line[i:].split(None, 1)
    return (name, labels, rest[0]) if rest else None


def parse_labels(text: str) -> dict[str, str]:
    """``a="1",b="x,y"`` -> {"a": "1", "b": "x,y"} (escapes kept verbatim; at most MAX_LABELS)."""
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n and len(out) < MAX_LABELS:
        while i < n and text[i] in ", ":
            i += 1
        j = i
        while j < n and (text[j].isalnum() or text[j] == "_"):
            j += 1
        key = text[i:j]
        if not key or text[j:j + 2] != '="':
            break
        k, esc = j + 2, False
        while k < n:
            if esc:
                esc = False
            elif text[k] == "\\":
                esc = True
            elif text[k] == '"':
                break
            k += 1
        if k >= n:
            break
        out[key] = text[j + 2:k]
        i = k + 1
    return out


def parse_value(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@dataclass
class Agg:
    total: float = 0.0
    peak: float = -math.inf
    n: int = 0


@dataclass
class PageSummary:
    """What one /metrics page said about the wanted names (see the module docstring)."""

    wanted: frozenset[str]
    label_names: frozenset[str] = frozenset()
    line_prefixes: tuple[bytes, ...] = ()  # the engines' metric-name prefixes (b"vllm:"): only such lines are read
    aggs: dict[str, Agg] = field(default_factory=dict)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    prefixes: set[str] = field(default_factory=set)  # the name prefixes seen ("vllm:"): which engine answered
    ignored: int = 0  # samples of wanted names whose value is not a finite number >= 0
    ignored_examples: list[str] = field(default_factory=list)
    skipped_lines: int = 0  # over-long lines
    _carry: bytes = b""
    _skipping: bool = False

    def feed(self, chunk: bytes) -> None:
        data = self._carry + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._carry = data
            if len(self._carry) > MAX_LINE:
                self._carry, self._skipping = b"", True
                self.skipped_lines += 1
            return
        head, self._carry = data[:cut + 1], data[cut + 1:]
        if self._skipping:  # the rest of an over-long line
            head = head[head.find(b"\n") + 1:]
            self._skipping = False
        self._scan(head)
        if len(self._carry) > MAX_LINE:
            self._carry, self._skipping = b"", True
            self.skipped_lines += 1

    def close(self) -> None:
        if self._carry and not self._skipping:
            self._scan(self._carry + b"\n")
        self._carry = b""

    def _scan(self, block: bytes) -> None:
        """The engine lines of *block* (whole lines), found with bytes.find: other lines cost nothing in Python."""
        for prefix in self.line_prefixes:
            nl = b"\n" + prefix
            pos = 0 if block.startswith(prefix) else (block.find(nl) + 1 or -1)
            while pos >= 0:
                end = block.find(b"\n", pos)
                end = len(block) if end < 0 else end
                if end - pos > MAX_LINE:
                    self.skipped_lines += 1
                else:
                    self.feed_line(block[pos:end].decode("utf-8", "replace"))
                nxt = block.find(nl, end)
                pos = nxt + 1 if nxt >= 0 else -1

    def feed_line(self, line: str) -> None:
        head = line.partition("{")[0].partition(" ")[0]
        self.prefixes.add(head.split(":", 1)[0] + ":")
        if head not in self.wanted:
            return
        parts = split_sample(line)
        if parts is None:
            return
        name, labels, value_text = parts
        v = parse_value(value_text)
        if v is None or not math.isfinite(v) or v < 0:
            self.ignored += 1
            if len(self.ignored_examples) < 3:
                self.ignored_examples.append(f"{name} {value_text[:20]}")
            return
        a = self.aggs.setdefault(name, Agg())
        a.total += v
        a.peak = max(a.peak, v)
        a.n += 1
        if name in self.label_names and name not in self.labels:
            self.labels[name] = parse_labels(labels)

    def total(self, *names: str) -> float | None:
        """Sum over label sets of the first name present."""
        for n in names:
            if n in self.aggs:
                return self.aggs[n].total
        return None

    def peak(self, *names: str) -> float | None:
        for n in names:
            if n in self.aggs:
                return self.aggs[n].peak
        return None


def parse_prometheus(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)] of a (small) Prometheus text page; comments and bad lines skipped."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if len(line) > MAX_LINE:
            continue
        parts = split_sample(line)
        if parts is None:
            continue
        v = parse_value(parts[2])
        if v is not None:
            out.setdefault(parts[0], []).append((parse_labels(parts[1]), v))
    return out
