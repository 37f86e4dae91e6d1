"""Serving-stats lines -> typed samples, whichever engine printed them (each engine's serving dialect, tried in
registry order: ``Engine.serving_sample``). Streams any size, never raises, stdlib only."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from kvplan.logs.serving import Sample

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.results import ServingDialect

__all__ = ["KEEP", "Sample", "iter_samples", "parse_line", "parse_samples", "to_corpus"]
KEEP = 50_000  # samples kept from a log (its last ones): hours of decode lines of 8 DP groups


def _dialects() -> list[ServingDialect]:
    from kvplan.engines import all_engines

    return [e.serving_dialect() for e in all_engines()]


def parse_line(line: str, dialects: Sequence[ServingDialect] | None = None) -> Sample | None:
    """The sample one log line holds, or None. Never raises."""
    try:
        if not isinstance(line, str) or len(line) > 65536:
            return None
        for d in dialects if dialects is not None else _dialects():
            s = d.sample(line)
            if s is not None:
                return s
    except Exception:  # noqa: BLE001 - a line no rule foresaw is skipped
        return None
    return None


def iter_samples(lines: Iterable[str]) -> Iterator[Sample]:
    """Samples of a log, in order; a later launch in the same file restarts the list (``launch`` marker sample).

    A line that completes the sample before it (vLLM's "SpecDecoding metrics") is folded into it."""
    from kvplan.engines import all_engines

    dialects = _dialects()
    markers = tuple(m for e in all_engines() for m in e.launch_markers)
    last: Sample | None = None
    try:
        for line in lines:
            if not isinstance(line, str):
                continue
            if any(d.amend(line, last) for d in dialects):
                continue
            if any(k in line for k in markers):
                if last is not None:
                    yield last
                last = None
                yield Sample(kind="launch")
                continue
            s = parse_line(line, dialects)
            if s is not None:
                if last is not None:
                    yield last
                last = s
        if last is not None:
            yield last
    except Exception:  # noqa: BLE001 - a failing iterator ends the log
        if last is not None:
            yield last


def parse_samples(lines: Iterable[str], keep: int = KEEP) -> list[Sample]:
    """The samples of the last launch in the log (at most the last ``keep``: memory stays bounded)."""
    out: deque[Sample] = deque(maxlen=keep)
    for s in iter_samples(lines):
        if s.kind == "launch":
            out.clear()
        else:
            out.append(s)
    return list(out)


def to_corpus(s: Sample) -> dict[str, Any]:
    """The keys ../shared/logcorpus/throughput.jsonl uses for this sample's line format (None omitted)."""
    from kvplan.engines import get_engine

    return get_engine(s.engine).serving_dialect().corpus_record(s)
