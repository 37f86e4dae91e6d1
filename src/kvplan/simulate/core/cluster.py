"""The global event loop: clients/arrivals, the router, and every scheduler instance, in time order.

Replicas sit behind a router (``round-robin`` or ``least-load``: fewest requests outstanding); inside a replica,
DP-attention groups take requests round robin (SGLang's DP controller, ``load_balance_method`` round_robin). The
loop always processes the earliest event: an arrival, or the end of some instance's planned action. A closed-loop
client sends its next request the moment its previous one finishes.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from math import inf
from typing import Any

from kvplan.simulate.core.request import Req
from kvplan.simulate.core.sink import Sink
from kvplan.simulate.workload.spec import Item, Workload


class Driver:
    """When each request of the workload is sent: its own timestamp, a rate (Poisson/gamma), client slots.

    ``t_next`` is always current: when the next request goes (inf: none left, or every client busy)."""

    def __init__(self, w: Workload):
        self.w = w
        self.it: Iterator[Item] = w.stream()
        self.total = w.total
        self.issued = 0
        self.slots = w.concurrency if w.concurrency is not None else 1 << 60
        self.avail_t = 0.0
        self.sched_t = 0.0
        self.pending: Item | None = None
        self.pending_t = 0.0
        self.rnd = random.Random(w.seed * 7919 + 1)
        self.timed_rate = w.rate is not None and w.rate != inf
        self.t_next = inf
        self._fetch()

    def _fetch(self) -> None:
        """Load the next request of the workload (if any) and its scheduled time; update ``t_next``."""
        item = None
        if self.total is None or self.issued < self.total:
            item = next(self.it, None)
        if item is None:
            self.pending, self.t_next = None, inf
            return
        if item.arrival is not None:
            t = item.arrival
        elif self.timed_rate:
            b, rate = self.w.burstiness, float(self.w.rate or inf)
            gap = self.rnd.gammavariate(b, 1.0 / (rate * b)) if self.issued else 0.0
            self.sched_t += gap
            t = self.sched_t
        else:
            t = 0.0
        self.pending, self.pending_t = item, t
        if self.slots <= 0:
            self.t_next = inf
        else:
            self.t_next = t if t > self.avail_t else self.avail_t

    def next_time(self) -> float:
        return self.t_next

    def pop(self, rid: int) -> Req:
        t, it = self.t_next, self.pending
        assert it is not None, "pop() without a pending request"
        self.issued += 1
        self.slots -= 1
        self._fetch()
        return Req(rid, t, it.prompt, it.output, it.max_new, it.prefix_id, it.prefix_len)

    def release(self, t: float) -> None:
        if self.slots <= 0 and t > self.avail_t:
            self.avail_t = t
        self.slots += 1
        if self.slots == 1 and self.pending is not None:  # a client is free again
            pt = self.pending_t
            self.t_next = pt if pt > self.avail_t else self.avail_t

    @property
    def done(self) -> bool:
        return self.pending is None


class Cluster:
    def __init__(self, replicas: list[list], sink: Sink, workload: Workload, router: str = "round-robin"):
        self.replicas = replicas
        self.instances = [i for rep in replicas for i in rep]
        for n, inst in enumerate(self.instances):
            inst.idx = n
        self.sink = sink
        self.driver = Driver(workload)
        self.router = router
        self.outstanding = [0] * len(self.instances)
        self._rr = 0
        self._rr_group = [0] * len(replicas)
        self.heap: list = []
        self.version = [0] * len(self.instances)
        self.rid = 0
        self.events = 0
        self.single = self.instances[0] if len(self.instances) == 1 else None

    def _pick(self) -> Any:
        if self.single is not None:
            return self.single
        reps = self.replicas
        if len(reps) == 1:
            j = 0
        elif self.router == "least-load":
            loads = [sum(self.outstanding[i.idx] for i in rep) for rep in reps]
            j = loads.index(min(loads))
        else:
            j = self._rr % len(reps)
            self._rr += 1
        rep = reps[j]
        g = self._rr_group[j] % len(rep)
        self._rr_group[j] += 1
        return rep[g]

    def _push(self, inst) -> None:
        self.version[inst.idx] += 1
        if inst.next_t < inf:
            heapq.heappush(self.heap, (inst.next_t, self.version[inst.idx], inst.idx))

    def _arrivals(self, t: float, hold=None) -> None:
        """Every request sent at ``t`` reaches its instance before any instance plans again (they are seen
        together at the next scheduling point); ``hold`` plans itself."""
        d = self.driver
        woken = []
        while d.t_next <= t:
            self.rid += 1
            r = d.pop(self.rid)
            inst = self._pick()
            self.outstanding[inst.idx] += 1
            inst.arrive(r, t)
            if inst is not hold and not inst.planned and inst not in woken:
                woken.append(inst)
        for inst in woken:
            inst.schedule()
            self._push(inst)

    def run(self, max_events: int | None = None) -> None:
        d, h = self.driver, self.heap
        for inst in self.instances:
            inst.schedule()
            self._push(inst)
        while True:
            t_arr = d.t_next
            while h and h[0][1] != self.version[h[0][2]]:
                heapq.heappop(h)
            t_inst = h[0][0] if h else inf
            if t_arr == inf and t_inst == inf:
                break
            self.events += 1
            if max_events is not None and self.events > max_events:
                break
            if t_arr <= t_inst:
                self._arrivals(t_arr)
                continue
            _, _, idx = heapq.heappop(h)
            inst = self.instances[idx]
            while True:  # the instance keeps the floor while its next event is the earliest of all
                done = inst.fire()
                t = inst.t
                for r in done:
                    self.sink.finished(r, t)
                if inst.dropped:
                    done = done + inst.dropped
                    inst.dropped = []
                for _ in done:
                    self.outstanding[idx] -= 1
                    d.release(t)
                if d.t_next <= t:
                    self._arrivals(t, hold=inst)
                inst.schedule()
                nt = inst.next_t
                if nt == inf or nt > d.t_next or (h and nt > h[0][0]):
                    break
                self.events += 1
            self._push(inst)
