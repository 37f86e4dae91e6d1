"""Serving-stats lines -> typed samples. Streams any size, never raises, stdlib only.

SGLang (reference sglang-memory.md §3.2), every version: "Decode batch." (<0.5) or "Decode batch," (0.5.x+) with
``#running-req``, ``#token``/``token usage`` or the hybrid forms (``#full token, full token usage, #swa token, swa
token usage`` / ``mamba usage``; HiSparse ``gpu token usage``), optional ``accept len``, ``cuda graph``, ``gen
throughput (token/s)``, ``#queue-req``; "Prefill batch" with ``#new-seq, #new-token, #cached-token``, usage,
``#running-req, #queue-req``, optional ``input throughput``; "KV cache pool is full. Retract requests.
#retracted_reqs: N, #new_tokens_gained: M". Prefixes "[date time TP0]", "[time TP0 EP0]", "[DP1 TP8]" or none.

vLLM (vllm-lmcache-memory.md §4.6): V1 "Engine 000: Avg prompt throughput: X tokens/s, Avg generation throughput:
Y tokens/s, Running: N reqs, Waiting: N reqs[, Deferred..][, Preemptions: N], GPU|CPU KV cache usage: X%[, Prefix
cache hit rate: Y%][, External prefix cache hit rate: Z%]"; V0 "... Running: N reqs, Swapped: N reqs, Pending: N
reqs, GPU KV cache usage: X%, CPU KV cache usage: Y%" (CPU = swap space); partial lines with the throughputs only;
"SpecDecoding metrics: Mean acceptance length: X" (attached to the stats sample just before it); V0 warnings
"Sequence group ... is preempted by PreemptionMode.X ... total_num_cumulative_preemption=N".
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_VALUE = re.compile(r"-?\d+(?:\.\d+)?%?|True|False|nan|inf")
_STAMP = re.compile(r"\[(?:(\d{4}-\d\d-\d\d) )?(\d\d:\d\d:\d\d)(?:[.,]\d+)?((?: [A-Z_]+\d+)*)[^\]]*\]")
_VLLM_STAMP = re.compile(r"(?:INFO|WARNING|WARN|DEBUG|ERROR) (\d\d-\d\d) (\d\d:\d\d:\d\d)")
_ENGINE = re.compile(r"Engine (\d+):")
_RANKS = re.compile(r"\b(?:DP|TP|PP|EP)\d+\b")
_V_NUM = {"prompt_tps": r"Avg prompt throughput: ([\d.]+)", "gen_tps": r"Avg generation throughput: ([\d.]+)",
          "running": r"Running: (\d+) reqs", "waiting": r"Waiting: (\d+) reqs", "swapped": r"Swapped: (\d+) reqs",
          "pending": r"Pending: (\d+) reqs", "preemptions": r"Preemptions: (\d+)",
          "usage_pct": r"\b\w+ KV cache usage: ([\d.]+)%",  # \b: one start per word (linear)
          "prefix_hit_pct": r"(?<!External )Prefix cache hit rate: ([\d.]+)%",
          "external_hit_pct": r"External prefix cache hit rate: ([\d.]+)%"}
_V_RX = {k: re.compile(v) for k, v in _V_NUM.items()}
_V0_CPU = re.compile(r"CPU KV cache usage: ([\d.]+)%")
_SPEC = re.compile(r"Mean acceptance length: ([\d.]+)")
_CUMUL = re.compile(r"total_num_cumulative_preemption=(\d+)")
_RETRACT = re.compile(r"#retracted_reqs: (\d+)(?:, #new_tokens_gained: (\d+))?")
KEEP = 50_000  # samples kept from a log (its last ones): hours of decode lines of 8 DP groups
_LAUNCH = ("server_args=", "non-default args:", "Initializing a V1 LLM engine", "Initializing an LLM engine",
           "vLLM API server version")


@dataclass
class Sample:
    """One serving-stats observation. Counts are per engine / DP group as the line prints them."""

    kind: str  # decode | prefill | stats (vLLM periodic line) | metrics | retract | preempt
    fmt: str = ""  # sglang | vllm-v1 | vllm-v0 | sglang-metrics | vllm-metrics
    t: float | None = None  # seconds (log timestamp; vLLM logs have no year) or wall clock for metrics
    source: str = ""  # "TP0", "DP1 TP8", "Engine 000", "" (the rank/engine that printed it)
    running: int | None = None
    queued: int | None = None  # SGLang #queue-req, vLLM Waiting (V1) / Pending (V0)
    swapped: int | None = None  # vLLM V0
    tokens: int | None = None  # SGLang #token (KV tokens in use), metrics num_used_tokens
    usage: float | None = None  # KV pool usage 0-1 (hybrid: the max of the pools, like SGLang's token_usage gauge)
    host_usage: float | None = None  # vLLM V0 CPU (swap) KV usage, SGLang HiCache host pool usage, 0-1
    gen_tps: float | None = None
    prompt_tps: float | None = None  # vLLM prompt throughput / SGLang prefill input throughput
    prefix_hit: float | None = None  # 0-1 (vLLM prefix cache hit rate; SGLang prefill cached/(cached+new))
    external_hit: float | None = None
    new_seq: int | None = None
    new_tokens: int | None = None
    cached_tokens: int | None = None
    accept_len: float | None = None  # speculative decoding (SGLang accept len, vLLM mean acceptance length)
    cuda_graph: bool | None = None
    retracted: int | None = None  # SGLang retraction events: requests retracted
    preemptions: int | None = None  # vLLM: preemptions in this interval / this warning
    cumulative_preemptions: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)  # SGLang key/value pairs as printed

    def to_corpus(self) -> dict[str, Any]:
        """The keys ../shared/logcorpus/throughput.jsonl uses for this line's format (None omitted)."""
        if self.fmt == "sglang":
            d = {"running_req": self.running, "tokens": self.tokens, "token_usage": self.usage,
                 "accept_len": self.accept_len, "gen_tps": self.gen_tps, "queue_req": self.queued,
                 "cuda_graph": self.cuda_graph}
        else:
            pct = None if self.usage is None else round(self.usage * 100, 1)
            d = {"prompt_tps": self.prompt_tps, "gen_tps": self.gen_tps, "running": self.running}
            if self.fmt == "vllm-v0":
                d.update(swapped=self.swapped, pending=self.queued, gpu_kv_usage_pct=pct,
                         cpu_kv_usage_pct=None if self.host_usage is None else round(self.host_usage * 100, 1))
            else:
                d.update(waiting=self.queued, gpu_kv_usage_pct=pct)
            d["prefix_hit_pct"] = None if self.prefix_hit is None else round(self.prefix_hit * 100, 1)
            d["spec_mean_accept_len"] = self.accept_len
        return {k: v for k, v in d.items() if v is not None}


def _num(v: str) -> float | int | bool | None:
    if v in ("True", "False"):
        return v == "True"
    try:
        v = v.rstrip("%")
        return float(v) if ("." in v or v in ("nan", "inf")) else int(v)
    except ValueError:
        return None


def _sane(v: Any) -> bool:
    """A printed number kvplan can compute with: finite, and an integer a float can hold (else left out)."""
    if isinstance(v, float):
        return math.isfinite(v)
    return not isinstance(v, int) or isinstance(v, bool) or abs(v) < 2**53


def _key_char(c: str) -> bool:
    return c.isalnum() or c in "_ -#/()."  # what \w matches in a str pattern, plus " -#/()."


def _pairs(line: str, pos: int) -> dict[str, Any]:
    """SGLang's ``key: value`` pairs after *pos*: a key of ``[#A-Za-z][\\w -#/().]*`` right before ``": "``, a value
    (``-?\\d+(.\\d+)?%?``, True, False, nan, inf) up to the next comma or blank. One pass over the line (the regex
    this replaces backtracked: a 32k-character line took seconds)."""
    out: dict[str, Any] = {}
    n, start = len(line), pos
    i = line.find(": ", pos)
    while i >= 0:
        k = j = i + 2
        while k < n and line[k] != "," and not line[k].isspace():
            k += 1
        b = i
        while b > start and _key_char(line[b - 1]):
            b -= 1
        while b < i and not (line[b] == "#" or ("a" <= line[b] <= "z") or ("A" <= line[b] <= "Z")):
            b += 1
        if b < i and _VALUE.fullmatch(line, j, k):
            out[line[b:i].strip()] = _num(line[j:k])
            start = k
            i = line.find(": ", k)
        else:
            i = line.find(": ", i + 1)
    return out


def _stamp(line: str) -> tuple[float | None, str]:
    m = _STAMP.search(line, 0, 300)
    if m:
        date, clock, ranks = m.groups()
        try:
            t = datetime.strptime(f"{date or '2000-01-01'} {clock}", "%Y-%m-%d %H:%M:%S").timestamp()
        except ValueError:
            t = None
        return t, " ".join(_RANKS.findall(ranks or ""))
    m = _VLLM_STAMP.search(line, 0, 300)
    if m:
        try:
            return datetime.strptime(f"2000-{m.group(1)} {m.group(2)}", "%Y-%m-%d %H:%M:%S").timestamp(), ""
        except ValueError:
            return None, ""
    return None, ""


def _sglang(line: str, kind: str, pos: int) -> Sample:
    t, src = _stamp(line)
    kv = {k: v for k, v in _pairs(line, pos).items() if _sane(v)}
    s = Sample(kind=kind, fmt="sglang", t=t, source=src, raw=kv)
    s.running, s.queued = kv.get("#running-req"), kv.get("#queue-req")
    s.tokens = kv.get("#token", kv.get("#full token"))
    usages = [kv[k] for k in ("token usage", "full token usage", "swa token usage", "mamba usage") if k in kv]
    s.usage = float(max(usages)) if usages else None
    if "cpu token usage" in kv:
        s.host_usage = float(kv["cpu token usage"])
    s.gen_tps = kv.get("gen throughput (token/s)")
    s.prompt_tps = kv.get("input throughput (token/s)")
    s.accept_len = kv.get("accept len")
    graph = next((kv[k] for k in ("cuda graph", "npu graph", "cpu graph") if k in kv), None)
    s.cuda_graph = graph if isinstance(graph, bool) else None
    if kind == "prefill":
        s.new_seq, s.new_tokens, s.cached_tokens = kv.get("#new-seq"), kv.get("#new-token"), kv.get("#cached-token")
        if s.new_tokens is not None and s.cached_tokens is not None and s.new_tokens + s.cached_tokens > 0:
            s.prefix_hit = s.cached_tokens / (s.new_tokens + s.cached_tokens)
    return s


def _vllm(line: str) -> Sample:
    t, _ = _stamp(line)
    eng = _ENGINE.search(line)
    vals = {k: rx.search(line) for k, rx in _V_RX.items()}
    got = {k: v for k, m in vals.items() if m and math.isfinite(v := float(m.group(1)))}  # "9" * 400 is inf
    v0 = "swapped" in got or "pending" in got
    s = Sample(kind="stats", fmt="vllm-v0" if v0 else "vllm-v1", t=t,
               source=f"Engine {eng.group(1)}" if eng else "")
    s.prompt_tps, s.gen_tps = got.get("prompt_tps"), got.get("gen_tps")
    s.running = int(got["running"]) if "running" in got else None
    q = got.get("pending", got.get("waiting"))
    s.queued = int(q) if q is not None else None
    s.swapped = int(got["swapped"]) if "swapped" in got else None
    s.preemptions = int(got["preemptions"]) if "preemptions" in got else None
    s.usage = got["usage_pct"] / 100 if "usage_pct" in got else None
    if v0:
        m = _V0_CPU.search(line)
        s.host_usage = float(m.group(1)) / 100 if m else None
    s.prefix_hit = got["prefix_hit_pct"] / 100 if "prefix_hit_pct" in got else None
    s.external_hit = got["external_hit_pct"] / 100 if "external_hit_pct" in got else None
    return s


def parse_line(line: str) -> Sample | None:
    """The sample one log line holds, or None. Never raises."""
    try:
        if not isinstance(line, str) or len(line) > 65536:
            return None
        for key, kind in (("Decode batch", "decode"), ("Prefill batch", "prefill")):
            i = line.find(key)
            if i >= 0 and line[i + len(key): i + len(key) + 1] in (".", ",", " ", ""):
                return _sglang(line, kind, i + len(key))
        if "Retract requests" in line or "#retracted_reqs" in line:
            t, src = _stamp(line)
            m = _RETRACT.search(line)
            return Sample(kind="retract", fmt="sglang", t=t, source=src, retracted=int(m.group(1)) if m else 1,
                          raw={"new_tokens_gained": int(m.group(2)) if m and m.group(2) else None})
        if "Avg generation throughput" in line or "Avg prompt throughput" in line:
            return _vllm(line)
        if "is preempted by" in line:
            t, _ = _stamp(line)
            m = _CUMUL.search(line)
            mode = "SWAP" if "SWAP" in line else "RECOMPUTE"
            return Sample(kind="preempt", fmt="vllm-v0", t=t, preemptions=1, raw={"mode": mode},
                          cumulative_preemptions=int(m.group(1)) if m else None)
    except Exception:  # noqa: BLE001 - a line no rule foresaw is skipped
        return None
    return None


def iter_samples(lines: Iterable[str]) -> Iterator[Sample]:
    """Samples of a log, in order; a later launch in the same file restarts the list (``launch`` marker sample).

    vLLM's "SpecDecoding metrics" line is folded into the stats sample just before it."""
    last: Sample | None = None
    try:
        for line in lines:
            if not isinstance(line, str):
                continue
            if "Mean acceptance length" in line:
                m = _SPEC.search(line)
                if m and last is not None and last.kind == "stats" and last.accept_len is None:
                    last.accept_len = float(m.group(1))
                continue
            if any(k in line for k in _LAUNCH):
                if last is not None:
                    yield last
                last = None
                yield Sample(kind="launch")
                continue
            s = parse_line(line)
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
