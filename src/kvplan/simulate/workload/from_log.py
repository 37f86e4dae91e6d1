"""The workload a serving log shows, for ``kvplan simulate --calibrate LOG`` when no workload is given.

From the log's own serving lines (``kvplan.diagnose.stats.parse_samples``), over the lines with requests running:

* in-flight KV tokens per running request ``I = Σ #token / Σ #running`` (SGLang ``#token``; vLLM KV usage × pool);
* prompt tokens per request ``p``: SGLang "Prefill batch" lines, ``Σ (#new-token + #cached-token) / Σ #new-seq``;
  vLLM prints no prefill line, so ``p = r × L`` from the ratio ``r`` of prompt to generation throughput (each
  request brings ``p`` prompt tokens for its ``L`` generated ones);
* output tokens per request ``L``: a request holds ``p + g`` tokens while it has generated ``g``, so over its life
  it holds ``p + L/2`` on average, and over requests of spread lengths the time-weighted mean is
  ``I = p + E[L²] / (2 E[L]) = p + L (1 + cv²) / 2`` (a request is in flight for a time proportional to its
  length). The spread is not in the log: outputs and prompts are taken ``uniform:0.5`` (cv² = 1/12 × 4 × 0.25 =
  1/12), and said so;
* clients: the mean of running + waiting (a closed loop keeps that many requests in flight).

What is inferred is printed with the figures it came from; a given option always wins over the inferred one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SPREAD = 0.5  # uniform:0.5 -> lengths uniform in [0.5 L, 1.5 L]
CV2 = SPREAD**2 / 3  # variance / mean² of uniform(1 - s, 1 + s)
MIN_REQUESTS, REQUESTS_PER_CLIENT, MAX_REQUESTS = 1000, 20, 20_000


@dataclass(frozen=True)
class LogWorkload:
    prompt_len: int
    output_len: int
    concurrency: int
    requests: int
    inflight_tokens: float  # the log's KV tokens per running request
    running: float
    queued: float
    prompt_source: str

    def values(self) -> dict[str, Any]:
        """The workload options this stands for (kvplan.simulate.workload.options.WORKLOAD_FIELDS)."""
        return {"requests": self.requests, "prompt_len": self.prompt_len, "output_len": self.output_len,
                "prompt_dist": f"uniform:{SPREAD:g}", "output_dist": f"uniform:{SPREAD:g}",
                "concurrency": self.concurrency}

    def note(self, given: set[str]) -> str:
        over = f" (given: {', '.join(sorted(given))})" if given else ""
        return (f"workload inferred from the log{over}: {self.requests:,} requests of ~{self.prompt_len:,} prompt "
                f"({self.prompt_source}) + ~{self.output_len:,} output tokens (both uniform ±{SPREAD:.0%}, assumed: "
                f"the log does not show the spread), {self.concurrency} clients (the log's {self.running:.1f} running "
                f"+ {self.queued:.1f} waiting); the log held {self.inflight_tokens:,.0f} KV tokens per running "
                f"request = prompt + output × (1 + cv²) / 2")


def infer(log_path: str, pool_tokens: int | None) -> LogWorkload | None:
    """The workload the log's serving lines show (None: too few lines with requests running)."""
    from kvplan.diagnose.stats import parse_samples
    from kvplan.logs.reader import iter_lines

    tok = run = que = n = 0.0
    pre_tokens = pre_seqs = 0
    prompt_tps = gen_tps = 0.0
    for s in parse_samples(iter_lines(log_path)):
        if s.kind == "prefill" and s.new_seq:
            pre_tokens += (s.new_tokens or 0) + (s.cached_tokens or 0)
            pre_seqs += s.new_seq
            continue
        if s.kind not in ("decode", "stats", "metrics") or not s.running:
            continue
        held = s.tokens if s.tokens is not None else (s.usage * pool_tokens if s.usage is not None and pool_tokens
                                                      else None)
        if held is None:
            continue
        tok += held
        run += s.running
        que += s.queued or 0
        n += 1
        if s.prompt_tps is not None and s.gen_tps:
            prompt_tps += s.prompt_tps
            gen_tps += s.gen_tps
    if n < 3 or run <= 0:
        return None
    inflight = tok / run
    k = (1 + CV2) / 2  # I = p + k × L
    if pre_seqs:
        p = pre_tokens / pre_seqs
        src = f"{pre_seqs:,} prefilled requests"
        out = (inflight - p) / k
    elif gen_tps > 0:
        r = prompt_tps / gen_tps
        out = inflight / (k + r)
        p = r * out
        src = f"prompt/generation throughput {r:.3f}"
    else:
        return None
    if out < 1 or p < 1:
        return None
    conc = max(1, round((run + que) / n))
    reqs = min(MAX_REQUESTS, max(MIN_REQUESTS, REQUESTS_PER_CLIENT * conc))
    return LogWorkload(max(1, round(p)), max(1, round(out)), conc, reqs, inflight, run / n, que / n, src)
