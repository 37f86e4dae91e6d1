"""vLLM serving-stats lines -> Samples. Streams any size, never raises, stdlib only.

vllm-lmcache-memory.md §4.6: V1 "Engine 000: Avg prompt throughput: X tokens/s, Avg generation throughput: Y
tokens/s, Running: N reqs, Waiting: N reqs[, Deferred..][, Preemptions: N], GPU|CPU KV cache usage: X%[, Prefix cache
hit rate: Y%][, External prefix cache hit rate: Z%]"; V0 "... Running: N reqs, Swapped: N reqs, Pending: N reqs, GPU
KV cache usage: X%, CPU KV cache usage: Y%" (CPU = swap space); partial lines with the throughputs only;
"SpecDecoding metrics: Mean acceptance length: X" (attached to the stats sample just before it); V0 warnings
"Sequence group ... is preempted by PreemptionMode.X ... total_num_cumulative_preemption=N". The non-default args
line, the engine config line and the API server's version line start a new launch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from kvplan.logs.serving import Sample, stamp

_ENGINE = re.compile(r"Engine (\d+):")
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


def _stats(line: str) -> Sample:
    t, _ = stamp(line)
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


def sample(line: str) -> Sample | None:
    """The sample a periodic stats line or a V0 preemption warning holds, else None."""
    if "Avg generation throughput" in line or "Avg prompt throughput" in line:
        return _stats(line)
    if "is preempted by" in line:
        t, _ = stamp(line)
        m = _CUMUL.search(line)
        mode = "SWAP" if "SWAP" in line else "RECOMPUTE"
        return Sample(kind="preempt", fmt="vllm-v0", t=t, preemptions=1, raw={"mode": mode},
                      cumulative_preemptions=int(m.group(1)) if m else None)
    return None


def amend(line: str, last: Sample | None) -> bool:
    """"SpecDecoding metrics: Mean acceptance length: X" belongs to the stats sample just before it."""
    if "Mean acceptance length" not in line:
        return False
    m = _SPEC.search(line)
    if m and last is not None and last.kind == "stats" and last.accept_len is None:
        last.accept_len = float(m.group(1))
    return True


def corpus_record(s: Sample) -> dict[str, Any]:
    """The keys ../shared/logcorpus/throughput.jsonl uses for a vLLM line of this format (None omitted)."""
    pct = None if s.usage is None else round(s.usage * 100, 1)
    d: dict[str, Any] = {"prompt_tps": s.prompt_tps, "gen_tps": s.gen_tps, "running": s.running}
    if s.fmt == "vllm-v0":
        d.update(swapped=s.swapped, pending=s.queued, gpu_kv_usage_pct=pct,
                 cpu_kv_usage_pct=None if s.host_usage is None else round(s.host_usage * 100, 1))
    else:
        d.update(waiting=s.queued, gpu_kv_usage_pct=pct)
    d["prefix_hit_pct"] = None if s.prefix_hit is None else round(s.prefix_hit * 100, 1)
    d["spec_mean_accept_len"] = s.accept_len
    return {k: v for k, v in d.items() if v is not None}


def pool_tokens(samples: Sequence[Sample]) -> tuple[int, str] | None:
    """vLLM's stats lines show usage but not tokens in use: the pool comes from the startup lines or /metrics."""
    return None
