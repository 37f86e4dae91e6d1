"""The prefix cache of one scheduler: device segments in eviction order, and the HiCache host tier.

A segment is the KV of one node of the engine's prefix structure, at the granularity kvplan tracks: a shared prefix
(``("p", id)``) or the private part of one request (``("r", rid)``). While a running request uses a segment it is
locked (counted as held, never evicted); unlocked segments are evictable and count as available to both engines'
admission (SGLang ``available_size() + evictable_size()``, vLLM's free block queue holds cached blocks).

Eviction order is the engine's:
  * SGLang radix tree (``mem_cache/radix_cache.py::RadixCache.evict``): least recently *accessed* leaf first, a leaf
    is evicted whole (``_delete_leaf``); access = match or insert, a retraction does not insert
    (``release_kv_cache(req, tree_cache, is_insert=False)``).
  * vLLM V1 (``v1/core/block_pool.py::BlockPool.free_blocks`` / ``get_new_blocks``): freed blocks join the tail of the
    free queue in reverse order and allocation takes from the head, so a freed request loses its *last* blocks
    first and its prefix survives longest: eviction is partial, oldest free first.

HiCache (``mem_cache/hiradix_cache.py::HiRadixCache``): ``write_through`` copies every inserted node to the host
(``_inc_hit_count`` with threshold 1), ``write_through_selective`` on the second hit (threshold 2), ``write_back``
on device eviction (``evict``); a match that continues on the host loads it back (``init_load_back``). The host
pool evicts least recently used host copies (``evict_host``). Traffic is counted in tokens; bytes at the edge.
"""

from __future__ import annotations

import heapq
from collections import deque

from kvplan.simulate.core.host import HostTier


class Segment:
    __slots__ = ("key", "tokens", "prio", "version", "locks", "on_device", "host", "hits", "hver")

    def __init__(self, key, tokens: int, prio: float):
        self.key = key
        self.tokens = tokens  # on device
        self.prio = prio
        self.version = 0
        self.locks = 0
        self.on_device = tokens > 0
        self.host = 0  # tokens copied to the host tier
        self.hits = 0
        self.hver = 0


class PrefixCache(HostTier):
    def __init__(self, page: int = 1, whole_leaf: bool = True, enabled: bool = True, host_tokens: int = 0,
                 write_policy: str = "write_through"):
        self.page = max(1, page)
        self.whole_leaf = whole_leaf
        self.enabled = enabled
        self.host_cap = max(0, int(host_tokens))
        self.write_policy = write_policy
        self.seg: dict = {}
        self.heap: list = []  # (prio, tie, version, key) of unlocked device segments
        self.anon: deque = deque()  # [prio, pages, tokens] of retired segments no request can match, oldest first
        self.host_heap: list = []  # (last access, tie, key) of host copies
        self.host_anon: deque = deque()  # [time, tokens] of host copies of retired segments
        self.evictable_pages = 0
        self.locked_pages = 0
        self.host_used = 0
        self._tie = 0
        # traffic and hit counters, tokens
        self.host_write_tokens = 0
        self.host_writeback_tokens = 0
        self.host_load_tokens = 0
        self.evicted_tokens = 0

    def _segment(self, key, now: float) -> Segment:
        return Segment(key, 0, now)

    def pages(self, tokens: int) -> int:
        return -(-tokens // self.page)

    # ---- queries -------------------------------------------------------------------------------------------
    def match(self, key) -> tuple[int, int]:
        """(tokens on device, further tokens only on the host) of a segment."""
        s = self.seg.get(key)
        if s is None or not self.enabled:
            return 0, 0
        dev = s.tokens if s.on_device else 0
        return dev, max(0, s.host - dev)

    # ---- state changes -------------------------------------------------------------------------------------
    def _push(self, s: Segment) -> None:
        s.version += 1
        self._tie += 1
        h = self.heap
        if len(h) > 2 * len(self.seg) + 64:  # drop stale entries (memory stays flat)
            seg = self.seg
            h[:] = [e for e in h if (x := seg.get(e[3])) is not None and x.version == e[2]]
            heapq.heapify(h)
        heapq.heappush(h, (s.prio, self._tie, s.version, s.key))

    def lock(self, key, now: float, touch: bool = True) -> int:
        """A running request takes the segment (device part); returns its device tokens."""
        s = self.seg.get(key)
        if s is None or not s.on_device:
            return 0
        if s.locks == 0:
            pg = self.pages(s.tokens)
            self.evictable_pages -= pg
            self.locked_pages += pg
            s.version += 1  # invalidates its heap entry
        s.locks += 1
        s.hits += 1
        if touch:
            s.prio = now
        if self.write_policy == "write_through_selective" and s.hits >= 2:
            self._to_host(s, now)
        tokens: int = s.tokens
        return tokens

    def unlock(self, key, now: float, touch: bool) -> None:
        s = self.seg.get(key)
        if s is None or s.locks == 0:
            return
        s.locks -= 1
        if s.locks == 0 and s.on_device:
            pg = self.pages(s.tokens)
            self.locked_pages -= pg
            self.evictable_pages += pg
            if touch:
                s.prio = now
            self._push(s)

    def insert(self, key, tokens: int, now: float, locked: bool, prio: float | None = None) -> None:
        """Put ``tokens`` of a segment on the device (grow it if present), locked by its user or evictable with
        eviction priority ``prio`` (default: now)."""
        if not self.enabled or tokens <= 0:
            return
        s = self.seg.get(key)
        if s is None:
            s = self.seg[key] = Segment(key, 0, now)
        old = self.pages(s.tokens) if s.on_device else 0
        if s.locks:
            self.locked_pages -= old
        elif s.on_device and old:
            self.evictable_pages -= old
        s.tokens, s.on_device = max(tokens, s.tokens if s.on_device else 0), True
        s.prio = now if prio is None else prio
        pg = self.pages(s.tokens)
        if locked:
            s.locks += 1
        if s.locks:
            self.locked_pages += pg
            s.version += 1
        else:
            self.evictable_pages += pg
            self._push(s)
        if self.host_cap and self.write_policy == "write_through":
            self._to_host(s, now)

    def take(self, key) -> int:
        """The owner re-admits: the device part of its own segment becomes its private KV again (leaves the
        cache); a host copy stays (it is not written twice)."""
        s = self.seg.get(key)
        if s is None:
            return 0
        n = s.tokens if s.on_device else 0
        if n:
            pg = self.pages(n)
            if s.locks:
                self.locked_pages -= pg
            else:
                self.evictable_pages -= pg
        s.tokens, s.on_device, s.locks = 0, False, 0
        s.version += 1
        if not s.host:
            self.seg.pop(key, None)
        return n

    def retire(self, key, tokens: int, now: float) -> None:
        """The KV of a finished request, which no later request can match: evictable from now (its access time is
        the latest, so it queues behind every segment before it); its host copy (write-through) joins the host
        pool's queue the same way. Same accounting as ``insert``, without a per-key segment."""
        if not self.enabled or tokens <= 0:
            return
        pg = self.pages(tokens)
        self.evictable_pages += pg
        self.anon.append([now, pg, tokens])
        if self.host_cap:
            s = self.seg.pop(key, None)
            had = 0
            if s is not None and s.host:
                had = s.host
                s.hver += 1
            if self.write_policy == "write_through" and tokens > had:
                add = min(tokens - had, self.host_cap)
                self._make_host_room(add, None)
                self.host_write_tokens += add
                self.host_used += add
                had += add
            if had:
                self.host_anon.append([now, had])

    def _evict_anon(self, want: int, now: float) -> int:
        a = self.anon[0]
        pg: int
        if self.whole_leaf or a[1] <= want:
            self.anon.popleft()
            pg, gone = a[1], a[2]
        else:
            pg, gone = want, min(a[2], want * self.page)
            a[1] -= pg
            a[2] -= gone
        self.evictable_pages -= pg
        self.evicted_tokens += gone
        if self.host_cap and self.write_policy == "write_back":
            self.host_writeback_tokens += gone
            self._make_host_room(gone, None)
            self.host_used += gone
            self.host_anon.append([now, gone])
        return pg

    def evict(self, pages: int, now: float) -> int:
        """Free at least ``pages`` pages of evictable device KV (eviction order of the engine); returns pages freed."""
        freed = 0
        h, anon = self.heap, self.anon
        while freed < pages and (h or anon):
            if anon and (not h or anon[0][0] <= h[0][0]):
                freed += self._evict_anon(pages - freed, now)
                continue
            prio, _, version, key = heapq.heappop(h)
            s = self.seg.get(key)
            if s is None or s.version != version or s.locks or not s.on_device:
                continue
            pg = self.pages(s.tokens)
            if self.whole_leaf or pg <= pages - freed:
                gone = s.tokens
                s.tokens, s.on_device = 0, False
                self.evictable_pages -= pg
                freed += pg
            else:  # vLLM: the last blocks of a freed request go first, its prefix survives
                k = pages - freed
                gone = min(s.tokens, k * self.page)
                s.tokens -= gone
                self.evictable_pages -= k
                freed += k
                self._tie += 1
                heapq.heappush(h, (prio, self._tie, s.version, key))
            self.evicted_tokens += gone
            if self.host_cap and self.write_policy == "write_back" and s.host < gone:
                self.host_writeback_tokens += gone - s.host
                self._to_host(s, now, gone)
            if not s.on_device and not s.host:
                self.seg.pop(key, None)
        return freed
