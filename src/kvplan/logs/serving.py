"""Serving-stats observations as typed samples (``Sample``), whichever engine printed them or whichever endpoint
served them, and the timestamp layouts serving lines carry. Each engine's serving dialect
(``engines/<engine>/serving.py``) turns its lines into Samples; kvplan.diagnose reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_STAMP = re.compile(r"\[(?:(\d{4}-\d\d-\d\d) )?(\d\d:\d\d:\d\d)(?:[.,]\d+)?((?: [A-Z_]+\d+)*)[^\]]*\]")
_LEVEL_STAMP = re.compile(r"(?:INFO|WARNING|WARN|DEBUG|ERROR) (\d\d-\d\d) (\d\d:\d\d:\d\d)")
_RANKS = re.compile(r"\b(?:DP|TP|PP|EP)\d+\b")


@dataclass
class Sample:
    """One serving-stats observation. Counts are per engine / DP group as the line prints them."""

    kind: str  # decode | prefill | stats (periodic stats line) | metrics | retract | preempt | launch
    fmt: str = ""  # "<engine>[-<variant>]": sglang | vllm-v1 | vllm-v0 | sglang-metrics | vllm-metrics
    t: float | None = None  # seconds (log timestamp; logs without a year get 2000) or wall clock for metrics
    source: str = ""  # "TP0", "DP1 TP8", "Engine 000", "" (the rank/engine that printed it)
    running: int | None = None
    queued: int | None = None  # requests waiting (SGLang #queue-req, vLLM Waiting / Pending)
    swapped: int | None = None  # vLLM V0
    tokens: int | None = None  # KV tokens in use (SGLang #token, metrics num_used_tokens)
    usage: float | None = None  # KV pool usage 0-1 (hybrid: the max of the pools, like SGLang's token_usage gauge)
    host_usage: float | None = None  # host KV tier usage 0-1 (vLLM V0 CPU swap, SGLang HiCache host pool)
    gen_tps: float | None = None
    prompt_tps: float | None = None  # prompt / prefill input throughput
    prefix_hit: float | None = None  # 0-1
    external_hit: float | None = None
    new_seq: int | None = None
    new_tokens: int | None = None
    cached_tokens: int | None = None
    accept_len: float | None = None  # speculative decoding acceptance length
    cuda_graph: bool | None = None
    retracted: int | None = None  # requests retracted (SGLang retraction events, or its gauge)
    preemptions: int | None = None  # preemptions in this interval / this warning
    cumulative_preemptions: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)  # key/value pairs as printed

    @property
    def engine(self) -> str:
        return self.fmt.split("-")[0]


def stamp(line: str) -> tuple[float | None, str]:
    """(seconds, rank labels) of a serving line: ``[YYYY-MM-DD HH:MM:SS DP1 TP8]`` / ``[HH:MM:SS TP0]``, else the
    logging layout ``LEVEL MM-DD HH:MM:SS`` (no year: 2000)."""
    m = _STAMP.search(line, 0, 300)
    if m:
        date, clock, ranks = m.groups()
        try:
            t: float | None = datetime.strptime(f"{date or '2000-01-01'} {clock}", "%Y-%m-%d %H:%M:%S").timestamp()
        except ValueError:
            t = None
        return t, " ".join(_RANKS.findall(ranks or ""))
    m = _LEVEL_STAMP.search(line, 0, 300)
    if m:
        try:
            return datetime.strptime(f"2000-{m.group(1)} {m.group(2)}", "%Y-%m-%d %H:%M:%S").timestamp(), ""
        except ValueError:
            return None, ""
    return None, ""
