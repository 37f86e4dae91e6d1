"""One scheduler process (an engine, or one DP-attention group) as a discrete-event machine.

The engine-independent part: the clock, the decoding batch in closed form (core/decode.py), the page pool, the
prefix cache, the waiting queue, and the plan/fire cycle. What the scheduler decides at each scheduling point is
the engine's policy (simulate/policy/*), which subclasses this and implements ``schedule``.

Cycle: ``schedule()`` looks at the state at ``t`` and plans one action that ends at ``next_t`` (one forward step,
or ``n`` decode steps advanced in closed form); ``fire()`` applies it at ``next_t`` and returns the requests that
finished. A request that arrives during a span the policy marked ``interruptible`` cuts it at the next step
boundary (the engine would see the request at its next scheduling point).
"""

from __future__ import annotations

import heapq
from collections import deque
from math import inf

from kvplan.simulate.core.cache import PrefixCache
from kvplan.simulate.core.decode import DecodeSet
from kvplan.simulate.core.request import DONE, RUNNING, WAITING, Req
from kvplan.simulate.core.sink import Sink
from kvplan.simulate.steptime.model import StepModel

SPAN, STEP, IDLE = 1, 2, 0


class Instance:
    def __init__(self, idx: int, cap_tokens: int, page: int, model: StepModel, cache: PrefixCache, sink: Sink,
                 max_running: int, host_bw_bytes_per_s: float = 0.0, kv_bytes_per_token: int = 0):
        self.idx = idx
        self.page = max(1, page)
        self.cap_pages = max(0, cap_tokens) // self.page
        self.model = model
        self.cache = cache
        self.sink = sink
        self.max_running = max(1, max_running)
        self.host_bw = host_bw_bytes_per_s
        self.kv_bytes = kv_bytes_per_token
        self.dec = DecodeSet(self.page)
        self.waiting: deque[Req] = deque()
        self.t = 0.0  # time of the current scheduling point
        self.step = 0  # decode steps done
        self.next_t = inf
        self.kind = IDLE
        self.span_n = 0
        self.interruptible = True
        self.planned = False
        self.aux_pages = 0  # pages held by requests still prefilling (chunked)
        self.t_acc = 0.0  # occupancy accounted up to here
        self.t_flush = 0.0  # start of the occupancy not yet handed to the sink's series
        self.next_flush = 0.0
        self.area_b = 0.0  # ∫ running dt since t_flush
        self.area_held = 0.0  # ∫ held pages dt since t_flush (KV usage, time-weighted)
        self.gen_acc = 0.0  # tokens sampled since t_flush
        self.prompt_acc = 0.0  # prefill tokens computed since t_flush
        self.dropped: list[Req] = []  # requests the engine aborted (the cluster frees their clients)

    # ---- pool ----------------------------------------------------------------------------------------------
    def held_pages(self) -> int:
        """Pages no eviction can free: decoding requests, prefills in progress, locked prefix segments."""
        d = self.dec
        p = d.pages_base + d.B * self.step if d.page == 1 else d.pages(self.step)
        return p + self.aux_pages + self.cache.locked_pages

    def free_pages(self) -> int:
        """Pages available to allocate (free + evictable)."""
        return self.cap_pages - self.held_pages()

    def settle_cache(self) -> int:
        """Evict what the held pages have grown into (evictable pages are reclaimed on demand); returns the free
        pages (free + evictable)."""
        held = self.held_pages()
        over = held + self.cache.evictable_pages - self.cap_pages
        if over > 0:
            self.cache.evict(over, self.t)
        return self.cap_pages - held

    def usage(self) -> float:
        return min(1.0, self.held_pages() / self.cap_pages) if self.cap_pages else 0.0

    # ---- the cycle -----------------------------------------------------------------------------------------
    def schedule(self) -> None:  # pragma: no cover - implemented by the engine policy
        raise NotImplementedError

    def plan_span(self, n: int, interruptible: bool) -> None:
        self.kind, self.span_n, self.interruptible = SPAN, n, interruptible
        self.next_t = self.t + self.model.span(self.dec.B, self.dec.kv_tokens(self.step), n)
        self.planned = True

    def plan_step(self, seconds: float) -> None:
        self.kind, self.interruptible = STEP, False
        self.next_t = self.t + seconds
        self.planned = True

    def plan_idle(self) -> None:
        self.kind, self.interruptible, self.next_t, self.planned = IDLE, True, inf, True

    def plan_decode(self, free: int, interruptible: bool) -> None:
        """Plan decode steps until the next finish or page shortage (at least one): ``decode_span_steps`` and
        ``plan_span`` in one, the path every finish goes through."""
        d, step = self.dec, self.step
        b = d.B
        f = d.finish
        while f:
            e = f[0]
            r = e[2]
            if r.state == RUNNING and e[0] == r.birth + r.output and r in d.members:
                break
            heapq.heappop(f)
        n = f[0][0] - step if f else 1 << 60
        m = free // b if d.page == 1 else d.steps_until_short(step, free)
        if m < n:
            n = m
        if n < 1:
            n = 1
        self.kind, self.span_n, self.interruptible, self.planned = SPAN, n, interruptible, True
        self.next_t = self.t + self.model.span(b, d.len_base + b * step, n)

    def decode_span_steps(self, free: int) -> int:
        """Decode steps until the next finish or page shortage (at least 1 when the next step fits)."""
        nf = self.dec.next_finish()
        until_finish = (nf - self.step) if nf is not None else 1 << 60
        return max(0, min(until_finish, self.dec.steps_until_short(self.step, free)))

    def fire(self) -> list[Req]:
        """Apply the planned action at ``next_t``; the requests that finished are returned (not yet re-planned)."""
        self.planned = False
        if self.kind == SPAN:
            return self._advance(self.span_n, self.next_t)
        if self.kind == STEP:
            return self.finish_step()
        return []

    def _advance(self, n: int, t_end: float) -> list[Req]:
        d = self.dec
        grow = d.B * n if d.page == 1 else d.pages(self.step + n) - d.pages(self.step)
        gen = self.dec.B * n
        self.gen_acc += gen  # (before _occupy: a flush at t_end hands the span's tokens to the interval they fell in)
        self.sink.cum_gen += gen
        self._occupy(t_end, grow)
        self.on_decode_steps(n)
        self.step += n
        self.t = t_end
        if self.cache.evictable_pages:  # the steps allocated their pages (evicting) before any finisher freed its own
            self.settle_cache()
        out = self.dec.pop_finished(self.step)
        for r in out:
            self.release_finished(r)
        return out

    def cut(self, t: float) -> None:
        """An arrival at ``t`` during an interruptible span: stop it at the first step boundary at or after ``t``."""
        if self.kind != SPAN or not self.interruptible or not self.planned or t >= self.next_t:
            return
        d = self.dec
        kv0 = d.kv_tokens(self.step)
        m = self.model.steps_within(d.B, kv0, t - self.t)
        if self.model.span(d.B, kv0, m) < t - self.t:
            m += 1
        if m >= self.span_n:  # the arrival lands in the span's last step: it is seen when the span ends
            return
        if m <= 0:
            self.planned = False
            return
        t_end = self.t + self.model.span(d.B, kv0, m)
        done = self._advance(m, t_end)
        assert not done, "a span never crosses a finish"
        self.planned = False

    def collect_finished(self) -> list[Req]:
        out = self.dec.pop_finished(self.step)
        for r in out:
            self.release_finished(r)
        return out

    def release_finished(self, r: Req) -> None:
        """Remove ``r`` from the batch and hand its KV to the prefix cache (policy decides how)."""
        self.dec.remove(r, self.step)
        r.state = DONE
        self.on_finish(r)

    # ---- arrivals ------------------------------------------------------------------------------------------
    def arrive(self, r: Req, t: float) -> None:
        r.instance = self.idx
        r.state = WAITING
        r.t_queued = t
        if self.planned and self.interruptible:
            if self.kind == IDLE:
                if t > self.t:
                    self.t = t
                if t > self.t_acc:
                    self.t_acc = t  # idle: nothing ran
                self.planned = False
            else:
                self.cut(t)
        self.waiting.append(r)

    def _occupy(self, t: float, grow_pages: int = 0, flush: bool = True) -> None:
        """Account the running batch and the KV it holds up to ``t`` (∫ running dt, ∫ held pages dt: a decode span
        that grows the batch's pages by ``grow_pages`` holds their mean, decode steps being near-equal in time); once
        per series bucket, hand it to the sink with a sample of the queue. (∫ queued dt is the sum of the requests'
        waits: Sink.admitted.)"""
        dt = t - self.t_acc
        if dt > 0:
            self.area_b += self.running_now() * dt
            self.area_held += (self.held_pages() + 0.5 * grow_pages) * dt
            self.t_acc = t
            if flush and t >= self.next_flush:
                self.flush()

    def running_now(self) -> int:
        """Requests the engine counts as running (SGLang: the decoding batch, its ``#running-req``; vLLM overrides:
        its ``running`` list holds requests still prefilling too)."""
        return self.dec.B

    def maybe_flush(self) -> None:
        """After a step's tokens are added (``_occupy(..., flush=False)`` before them): hand over if it is time."""
        if self.t_acc >= self.next_flush:
            self.flush()

    def add_tokens(self, gen: float, prompt: float) -> None:
        self.gen_acc += gen
        self.prompt_acc += prompt
        self.sink.cum_gen += gen

    def flush(self) -> None:
        t0, t1 = self.t_flush, self.t_acc
        if t1 > t0:  # (a zero-length interval has no tokens: actions take time)
            span = t1 - t0
            s = self.sink
            usage = min(1.0, self.area_held / span / self.cap_pages) if self.cap_pages else 0.0
            s.series.interval(t0, t1, self.area_b / span, len(self.waiting), usage, self.gen_acc, self.prompt_acc)
            s.first_t = t0 if s.first_t is None else min(s.first_t, t0)
            s.running_area += self.area_b
            s.held_token_area += self.area_held * self.page
        self.area_b = self.area_held = self.gen_acc = self.prompt_acc = 0.0
        self.t_flush = t1
        self.next_flush = t1 + 4 * self.sink.series.w  # a few buckets per hand-over: the series stays cheap

    # ---- hooks for policies --------------------------------------------------------------------------------
    def on_decode_steps(self, n: int) -> None:
        """Called before ``step`` advances by ``n`` decode steps (SGLang decays its new-token ratio here)."""

    def on_finish(self, r: Req) -> None:  # pragma: no cover - implemented by the engine policy
        raise NotImplementedError

    def finish_step(self) -> list[Req]:  # pragma: no cover - implemented by the engine policy
        raise NotImplementedError

    def host_load_s(self, tokens: int) -> float:
        return tokens * self.kv_bytes / self.host_bw if (tokens and self.host_bw) else 0.0
