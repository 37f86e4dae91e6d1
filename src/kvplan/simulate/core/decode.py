"""The decoding batch of one scheduler, advanced in closed form: no per-token loop.

Every running request gains one token per decode step, so with ``step`` the scheduler's decode-step counter a
request's output is ``gen = step - birth`` and its KV ``prompt + gen - 1``. The batch keeps sums that make every
quantity a span needs O(1) or O(page):

    K(step)      = Σ (prompt + gen)              = len_base + B × step        (tokens attended to)
    finish step  = birth + output                 (a heap: the next finish is its top)
    pages(step)  = Σ ceil(kv_len / page)          (a histogram of kv_len mod page, rotated by step)

A page is needed at a step by every request whose ``kv_len % page == 0`` before it (see core/request.py), so the
number of decode steps the free pages allow is found from the histogram without visiting requests.
"""

from __future__ import annotations

import heapq
from itertools import accumulate

from kvplan.simulate.core.request import RUNNING, Req


class DecodeSet:
    __slots__ = ("page", "B", "len_base", "pages_base", "hist", "finish", "members", "_n")

    def __init__(self, page: int = 1):
        self.page = max(1, int(page))
        self.B = 0
        self.len_base = 0  # Σ (prompt + gen - step) over members: K(step) = len_base + B × step
        self.pages_base = 0  # Σ q: a member's pages are q + ceil((step + r) / page), r = (kv_len - step) mod page
        self.hist = [0] * self.page  # count of members by (kv_len - step) mod page
        self.finish: list[tuple[int, int, Req]] = []  # (finish step, tie, req): lazy deletion by state
        self.members: set[Req] = set()
        self._n = 0

    # ---- membership ----------------------------------------------------------------------------------------
    def add(self, r: Req, step: int) -> None:
        """``r`` has ``gen`` sampled tokens now; from here it gains one per decode step."""
        gen = r.gen
        birth = r.birth = step - gen
        r.state = RUNNING
        self.B += 1
        self.len_base += r.prompt - birth
        kv = r.prompt + gen - 1 - r.shared  # private KV: a locked shared prefix is the cache's
        if self.page == 1:
            self.pages_base += kv - step
        else:
            self.hist[(kv - step) % self.page] += 1
            self.pages_base += self._pages(kv) - self._crossed(kv, step)
        self._n += 1
        self.members.add(r)
        f = self.finish
        if len(f) > 2 * self.B + 64:  # drop entries of members that left (memory stays flat)
            f[:] = [e for e in f if self._valid(e)]
            heapq.heapify(f)
        heapq.heappush(f, (birth + r.output, self._n, r))

    def remove(self, r: Req, step: int) -> None:
        """``r`` leaves the batch at ``step`` with the ``gen = step - birth`` tokens it sampled (a retracted or
        preempted request keeps them: SGLang refills prompt + output, vLLM recomputes both)."""
        r.gen = step - r.birth
        self.B -= 1
        self.len_base -= r.prompt - r.birth
        kv = r.prompt + (step - r.birth) - 1 - r.shared
        if self.page == 1:
            self.pages_base -= kv - step
        else:
            self.hist[(kv - step) % self.page] -= 1
            self.pages_base -= self._pages(kv) - self._crossed(kv, step)
        self.members.discard(r)

    # ---- closed-form quantities ------------------------------------------------------------------------------
    def _pages(self, kv: int) -> int:
        return -(-kv // self.page) if kv > 0 else 0

    def _crossed(self, kv: int, step: int) -> int:
        """Pages this member is counted to have gained by ``step`` in the rotated-histogram sum (see pages)."""
        return 0 if self.page == 1 else -(-(step + (kv - step) % self.page) // self.page)

    def kv_tokens(self, step: int) -> int:
        """Σ (prompt + gen): the tokens the next decode step attends to."""
        return self.len_base + self.B * step

    def pages(self, step: int) -> int:
        """Σ ceil(private kv_len / page) over members at ``step`` (pages they hold)."""
        if self.page == 1:
            return self.pages_base + self.B * step
        total = self.pages_base
        p = self.page
        for res, n in enumerate(self.hist):
            if n:
                total += n * -(-(step + res) // p)
        return total

    def _valid(self, e: tuple) -> bool:
        """A heap entry is current if its request is a member with the same birth (not an entry from before a
        retraction or preemption)."""
        r = e[2]
        return r.state == RUNNING and e[0] == r.birth + r.output and r in self.members

    def next_finish(self) -> int | None:
        """The decode step at whose end the next member finishes (its last token is sampled)."""
        f = self.finish
        while f and not self._valid(f[0]):
            heapq.heappop(f)
        return f[0][0] if f else None

    def pop_finished(self, step: int) -> list[Req]:
        out = []
        f = self.finish
        while f and f[0][0] <= step:
            e = heapq.heappop(f)
            if self._valid(e):
                out.append(e[2])
        return out

    def steps_until_short(self, step: int, free_pages: int) -> int:
        """Decode steps that fit in ``free_pages`` more pages, starting at ``step`` (0: the next step is short)."""
        if self.B == 0:
            return 1 << 60
        p = self.page
        if p == 1:
            return max(0, free_pages // self.B)
        # crossings at step j: members with (kv - step0 ... ) ≡ 0 mod p, i.e. hist[(-(step + j)) mod p]
        order = [self.hist[(-(step + j)) % p] for j in range(p)]
        cum = list(accumulate(order))
        cycles = free_pages // self.B if self.B else 0
        n = cycles * p
        left = free_pages - cycles * self.B
        for j, c in enumerate(cum):
            if c > left:
                return n + j
        return n + p  # unreachable: a full cycle needs B > left pages

    def pages_needed_next(self, step: int) -> int:
        """Pages the next decode step allocates."""
        return self.B if self.page == 1 else self.hist[(-step) % self.page]
