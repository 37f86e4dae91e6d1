"""The HiCache host tier of a prefix cache: write-through, write-back, load-back, and its own LRU.

``mem_cache/hiradix_cache.py::HiRadixCache`` (0.5.9): ``write_backup`` copies a node to the host pool (evicting the
least recently used host copies when full, ``evict_host``); ``init_load_back`` copies a host-only prefix back to the
device before the prefill that matched it. Token counts here; bytes per rank at the report's edge.
"""

from __future__ import annotations

import heapq
from typing import Any


class HostTier:
    """Mixed into PrefixCache (which owns ``seg``, ``host_cap``, ``host_used``, the queues and the counters)."""

    seg: dict
    host_cap: int
    host_used: int
    host_heap: list
    host_anon: Any
    write_policy: str
    enabled: bool
    host_write_tokens: int
    host_load_tokens: int
    _tie: int

    def host_write(self, key, tokens: int, now: float) -> None:
        """Write-through of a running request's freshly prefilled tokens (HiCache inserts them into the tree, which
        backs them up at once with ``write_through``)."""
        if not (self.enabled and self.host_cap and self.write_policy == "write_through") or tokens <= 0:
            return
        s = self.seg.get(key)
        if s is None:
            s = self.seg[key] = self._segment(key, now)
        self._to_host(s, now, tokens, count=True)

    def load_back(self, key, now: float) -> int:
        """Copy the host part of a segment to the device (the caller allocates it); returns tokens loaded."""
        s = self.seg.get(key)
        if s is None or s.host <= (s.tokens if s.on_device else 0):
            return 0
        n: int = s.host - (s.tokens if s.on_device else 0)
        self.host_load_tokens += n
        self._touch_host(s, now)
        return n

    # ---- host tier -----------------------------------------------------------------------------------------
    def _to_host(self, s: Any, now: float, tokens: int | None = None, count: bool = False) -> None:
        want = min(self.host_cap, tokens if tokens is not None else s.tokens)
        if want <= s.host:
            return
        add = want - s.host
        self._make_host_room(add, s.key)
        add = min(add, self.host_cap - self.host_used)
        if add <= 0:
            return
        if tokens is None or count:
            self.host_write_tokens += add
        s.host += add
        self.host_used += add
        self._touch_host(s, now)

    def _touch_host(self, s: Any, now: float) -> None:
        self._tie += 1
        s.hver += 1
        h = self.host_heap
        if len(h) > 2 * len(self.seg) + 64:
            seg = self.seg
            h[:] = [e for e in h if (x := seg.get(e[3])) is not None and x.hver == e[2]]
            heapq.heapify(h)
        heapq.heappush(h, (now, self._tie, s.hver, s.key))

    def _make_host_room(self, tokens: int, keep) -> None:
        h, anon = self.host_heap, self.host_anon
        while self.host_used + tokens > self.host_cap and (h or anon):
            if anon and (not h or anon[0][0] <= h[0][0]):
                a = anon[0]
                drop = min(a[1], self.host_used + tokens - self.host_cap)
                a[1] -= drop
                self.host_used -= drop
                if a[1] <= 0:
                    anon.popleft()
                continue
            _, _, hver, key = heapq.heappop(h)
            s = self.seg.get(key)
            if s is None or s.hver != hver or key == keep or not s.host or s.locks:
                continue
            self.host_used -= s.host
            s.host = 0
            if not s.on_device:
                self.seg.pop(key, None)

    def _segment(self, key, now: float) -> Any:  # pragma: no cover - provided by PrefixCache
        raise NotImplementedError
