"""SGLang serving-stats lines -> Samples. Streams any size, never raises, stdlib only.

Every version (reference sglang-memory.md §3.2): "Decode batch." (<0.5) or "Decode batch," (0.5.x+) with
``#running-req``, ``#token``/``token usage`` or the hybrid forms (``#full token, full token usage, #swa token, swa
token usage`` / ``mamba usage``; HiSparse ``gpu token usage``), optional ``accept len``, ``cuda graph``, ``gen
throughput (token/s)``, ``#queue-req``; "Prefill batch" with ``#new-seq, #new-token, #cached-token``, usage,
``#running-req, #queue-req``, optional ``input throughput``; "KV cache pool is full. Retract requests.
#retracted_reqs: N, #new_tokens_gained: M". Prefixes "[date time TP0]", "[time TP0 EP0]", "[DP1 TP8]" or none.
A ServerArgs dump starts a new launch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from kvplan.logs.serving import Sample, stamp

_VALUE = re.compile(r"-?\d+(?:\.\d+)?%?|True|False|nan|inf")
_RETRACT = re.compile(r"#retracted_reqs: (\d+)(?:, #new_tokens_gained: (\d+))?")


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


def _batch(line: str, kind: str, pos: int) -> Sample:
    t, src = stamp(line)
    kv: dict[str, Any] = {k: v for k, v in _pairs(line, pos).items() if _sane(v)}
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


def sample(line: str) -> Sample | None:
    """The sample a "Decode batch" / "Prefill batch" / retraction line holds, else None."""
    for key, kind in (("Decode batch", "decode"), ("Prefill batch", "prefill")):
        i = line.find(key)
        if i >= 0 and line[i + len(key): i + len(key) + 1] in (".", ",", " ", ""):
            return _batch(line, kind, i + len(key))
    if "Retract requests" in line or "#retracted_reqs" in line:
        t, src = stamp(line)
        m = _RETRACT.search(line)
        return Sample(kind="retract", fmt="sglang", t=t, source=src, retracted=int(m.group(1)) if m else 1,
                      raw={"new_tokens_gained": int(m.group(2)) if m and m.group(2) else None})
    return None


def corpus_record(s: Sample) -> dict[str, Any]:
    """The keys ../shared/logcorpus/throughput.jsonl uses for an SGLang line (None omitted)."""
    d = {"running_req": s.running, "tokens": s.tokens, "token_usage": s.usage, "accept_len": s.accept_len,
         "gen_tps": s.gen_tps, "queue_req": s.queued, "cuda_graph": s.cuda_graph}
    return {k: v for k, v in d.items() if v is not None}


def pool_tokens(samples: Sequence[Sample]) -> tuple[int, str] | None:
    """The pool size per DP group from the Decode lines: median of #token / token usage (usage >= 0.2, so the
    2-decimal rounding of usage stays under 2.5 %)."""
    vals = sorted(s.tokens / s.usage for s in samples if s.kind == "decode" and s.tokens and s.usage
                  and s.usage >= 0.2 and s.raw.get("token usage") is not None)
    if not vals:
        return None
    return round(vals[len(vals) // 2]), "estimated from the Decode lines (#token / token usage)"


def amend(line: str, last: Sample | None) -> bool:
    """No SGLang line completes the one before it."""
    return False
