"""Where every scheduler reports what happened: latencies, tokens, occupancy over time, scheduler events.

One Sink serves all instances of a simulation (DP groups, replicas). It keeps histograms and counters only.
"""

from __future__ import annotations

from kvplan.simulate.core.metrics import LogHistogram, TimeSeries
from kvplan.simulate.core.request import Req


class Sink:
    def __init__(self, instances: int = 1, series_width_s: float = 1.0, total_requests: int | None = None):
        self.ttft = LogHistogram()
        self.tpot = LogHistogram()
        self.e2e = LogHistogram()
        self.queue = LogHistogram()  # arrival -> first admission
        self.series = TimeSeries(series_width_s)
        self.instances = max(1, instances)
        self.total_requests = total_requests
        self.done = 0
        self.gen_tokens = 0  # output tokens of finished requests
        self.prompt_tokens = 0  # prompt tokens of finished requests (as sent)
        self.cum_gen = 0.0  # output tokens sampled so far, all requests
        self.prefill_tokens = 0  # tokens computed by prefills (recomputation included)
        self.cached_tokens = 0  # tokens an admission found in the device prefix cache
        self.lookup_tokens = 0  # tokens admissions looked up (fill lengths)
        self.host_hit_tokens = 0
        self.preemptions = 0  # vLLM preempted requests / SGLang retracted requests
        self.preempt_events = 0  # steps that preempted / retraction events
        self.aborted = 0
        self.first_t: float | None = None
        self.running_area = 0.0  # ∫ running dt, all instances
        self.held_token_area = 0.0  # ∫ KV tokens held (page-granular: running, prefilling, locked prefixes) dt
        self.queued_area = 0.0  # ∫ queued dt, all instances: the sum of every wait in a queue
        self.last_t = 0.0
        self.mark: dict[str, tuple[float, float]] = {}  # "10%"/"90%" -> (time, cum_gen)
        n = total_requests or 0
        self._marks = [(max(1, -(-n // 10)), "10%"), (max(1, -(-9 * n // 10)), "90%")] if n >= 10 else []

    # ---- per request ---------------------------------------------------------------------------------------
    def admitted(self, r: Req, t: float, looked_up: int, cached: int, host: int, computed: int) -> None:
        self.queued_area += t - r.t_queued
        if r.retracts == 0 and r.gen == 0:
            self.queue.add(t - r.arrival)
        self.lookup_tokens += looked_up
        self.cached_tokens += cached
        self.host_hit_tokens += host
        self.prefill_tokens += computed

    def first_token(self, r: Req, t: float) -> None:
        r.t_first = t
        self.ttft.add(t - r.arrival)

    def finished(self, r: Req, t: float) -> None:
        self.done += 1
        self.e2e.add(t - r.arrival)
        if r.output > 1:
            self.tpot.add((t - r.t_first) / (r.output - 1))
        self.gen_tokens += r.output
        self.prompt_tokens += r.prompt
        if not self.done & 1023:  # bin the latency buffers (memory stays flat)
            for h in (self.ttft, self.tpot, self.e2e, self.queue):
                h.flush()
        if t > self.last_t:
            self.last_t = t
        if self._marks and self.done >= self._marks[0][0]:
            self.mark[self._marks.pop(0)[1]] = (t, self.cum_gen)

    def aborted_req(self, r: Req, t: float) -> None:
        self.aborted += 1
        self.last_t = max(self.last_t, t)

    # ---- over time -----------------------------------------------------------------------------------------
    def tokens(self, t0: float, t1: float, gen: float, prompt: float = 0.0) -> None:
        if self.first_t is None:
            self.first_t = t0
        self.cum_gen += gen
        self.series.tokens(t0, t1, gen, prompt)

    def occupancy(self, t0: float, t1: float, running: int, queued: int, usage: float) -> None:
        """One instance's state over [t0, t1) (the series sums running and queued over instances)."""
        self.series.occupancy(t0, t1, running, queued, usage)
