"""What the fleet asks Prometheus: the engines' metric names (their ``MetricNames`` tables, every version's name),
the user's ``--match`` selector checked, and the PromQL of the four requests.

    series      {__name__=~"<every name kvplan reads>",<match>}                       discovery (labels only)
    scrapes     max by (job,namespace,pod,instance) (timestamp({__name__=~"<running>",<match>}))
    totals      sum by (__name__,job,namespace,pod,instance) ({__name__=~"<names summed>",<match>})
    peaks       max by (__name__,job,namespace,pod,instance) ({__name__=~"<names peaked>",<match>})

A replica is one scrape target: its ``job``, ``namespace``, ``pod`` and ``instance`` labels (the ones it has). Its
label sets (vLLM engines, SGLang DP ranks) add up and peak as ``diagnose --url`` adds up a page's samples
(``PageSummary.total`` / ``peak``), here inside Prometheus so one series per replica and name comes back.
``timestamp()`` gives, at each step, the time of the scrape the values come from: a step repeating the previous
scrape is dropped, so a replica's samples are Prometheus' own scrapes, with their own times, as ``--url`` reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from kvplan.engines.results import MetricNames
from kvplan.errors import KvplanError

REPLICA_LABELS = ("job", "namespace", "pod", "instance")
PEAK_FIELDS = ("usage", "accept_length", "pool_tokens")  # read as the peak over label sets (PageSummary.peak)
LAST_FIELDS = ("requests", "pool_tokens")  # only the window's last value is used (with the histograms)
MAX_SELECTOR = 1000
MAX_MATCHERS = 32
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_MATCHER = re.compile(r"""\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')\s*""")
MATCH_HINT = 'label matchers, e.g. --match \'job="vllm",namespace=~"llm-.*"\''


def selector(text: str | None) -> str:
    """``--match``: label matchers (``a="x",b=~"y.*"``, braces optional) checked and joined by commas; "" for
    none. Anything else (a metric name, a function, an unclosed quote) is a one-line error."""
    if text is None or not text.strip():
        return ""
    s = text.strip()
    if len(s) > MAX_SELECTOR:
        raise KvplanError(f"--match is {len(s):,} characters; at most {MAX_SELECTOR}", MATCH_HINT)
    if s.startswith("{"):
        if not s.endswith("}"):
            raise KvplanError(f"--match {s[:60]!r}: the braces are not closed", MATCH_HINT)
        s = s[1:-1]
    out, i = [], 0
    while i < len(s):
        m = _MATCHER.match(s, i)
        if m is None:
            raise KvplanError(f"--match: not a label matcher at {s[i:i + 40]!r}", MATCH_HINT)
        out.append(f"{m.group(1)}{m.group(2)}{m.group(3)}")
        i = m.end()
        if i < len(s):
            if s[i] != ",":
                raise KvplanError(f"--match: expected ',' at {s[i:i + 40]!r}", MATCH_HINT)
            i += 1
        if len(out) > MAX_MATCHERS:
            raise KvplanError(f"--match: more than {MAX_MATCHERS} matchers", MATCH_HINT)
    return ",".join(out)


@dataclass(frozen=True)
class Names:
    """The metric names of every engine, by use."""

    engine_of_prefix: dict[str, str]  # "vllm:" -> registry name
    tables: dict[str, MetricNames]  # registry name -> its table
    running: tuple[str, ...]  # the running gauges (a replica is a target that has one)
    summed: tuple[str, ...]  # read at every step, summed over label sets
    peaked: tuple[str, ...]  # read at every step, the peak over label sets
    last_only: frozenset[str]  # of those, only the last value is kept
    info: frozenset[str]  # config-info metrics: their labels, from discovery

    @property
    def every(self) -> tuple[str, ...]:
        return tuple(sorted({*self.running, *self.summed, *self.peaked, *self.info}))


def names() -> Names:
    from kvplan.engines import all_engines

    tables = {e.name: e.metrics for e in all_engines() if e.metrics}
    running: set[str] = set()
    summed: set[str] = set()
    peaked: set[str] = set()
    last: set[str] = set()
    for t in tables.values():
        running.update(t.running)
        for f in fields(t):
            v = getattr(t, f.name)
            if isinstance(v, tuple):
                (peaked if f.name in PEAK_FIELDS else summed).update(v)
                if f.name in LAST_FIELDS:
                    last.update(v)
        hist = {t.histogram(w) + s for w, s in (("prompt", "_count"), ("prompt", "_sum"), ("generation", "_sum"))}
        summed.update(hist)
        last.update(hist)
    every = running | summed | peaked
    bad = sorted(n for n in every if not _NAME.match(n))
    assert not bad, f"metric names that are not Prometheus names: {bad}"
    return Names({t.prefix: name for name, t in tables.items()}, tables, tuple(sorted(running)), tuple(sorted(summed)),
                 tuple(sorted(peaked)), frozenset(last), frozenset(t.config_info for t in tables.values()
                                                                     if t.config_info))


def _sel(names_: set[str] | tuple[str, ...] | frozenset[str], match: str) -> str:
    regex = "|".join(sorted(names_))  # names hold no regex metacharacter ([a-zA-Z0-9_:] only)
    return "{" + f'__name__=~"{regex}"' + (f",{match}" if match else "") + "}"


def series_match(n: Names, match: str) -> str:
    return _sel(n.every, match)


def scrapes_query(n: Names, match: str) -> str:
    return f"max by ({','.join(REPLICA_LABELS)}) (timestamp({_sel(n.running, match)}))"


def values_query(agg: str, wanted: set[str], match: str) -> str:
    return f"{agg} by (__name__,{','.join(REPLICA_LABELS)}) ({_sel(wanted, match)})"
