"""Prefix matching at admission and KV release at finish/retraction, shared by both engines' policies.

A request's KV is, in order: the shared prefix of its group (segment ``("p", id)``, locked while it runs), then its
private tokens. A request that was retracted (SGLang) or preempted (vLLM) left its private tokens in the cache as
segment ``("r", rid)``; when it is admitted again, what survived is matched (device) or loaded back (HiCache host).

    device hit  = shared prefix if fully on device, then the own segment's device part    (capped at fill - 1)
    host hit    = what the host tier adds contiguously after the device hit
    computed    = fill - device hit - host hit                                          (the prefill's new tokens)

The match leaves at least one token to compute (SGLang ``init_next_round_input``: ``max_prefix_len =
input_len - 1``; vLLM ``max_cache_hit_length = num_tokens - 1``); vLLM hits are whole blocks.
"""

from __future__ import annotations

from kvplan.simulate.core.request import Req


def lookup(inst, r: Req, whole_pages: bool) -> tuple[int, int, int, int]:
    """(device hit tokens, host hit tokens, evictable pages of the shared prefix the hit would lock, evictable pages
    of its own segment it would take back) for admitting ``r`` now."""
    c = inst.cache
    if not c.enabled or (r.prefix_id is None and not r.retracts):
        return 0, 0, 0, 0  # a fresh request without a shared prefix matches nothing
    ls = r.prefix_len if r.prefix_id is not None else 0
    dev = cover = 0
    cont = True
    shared_ev = own_ev = 0
    if ls:
        d, h = c.match(("p", r.prefix_id))
        if d >= ls:
            dev = cover = ls
            s = c.seg.get(("p", r.prefix_id))
            if s is not None and s.locks == 0:
                shared_ev = c.pages(s.tokens)
        elif d + h >= ls:
            dev, cover = d, ls
        else:
            dev, cover, cont = d, d + h, False
    if cont:
        d, h = c.match(("r", r.rid))
        if d or h:
            if dev == ls:
                dev += d
                own_ev = c.pages(d)
            cover = ls + d + h
    cover = max(cover, dev)
    limit = max(0, r.fill_len - 1)
    dev, cover = min(dev, limit), min(cover, limit)
    if whole_pages:
        dev = dev // inst.page * inst.page
        cover = max(dev, cover // inst.page * inst.page)
    return dev, cover - dev, shared_ev, own_ev


def claim(inst, r: Req, dev: int, host: int, now: float) -> None:
    """Take the matched KV for ``r``: lock its shared prefix, take back its own segment, load back host tokens."""
    r.shared, r.pinned = 0, False
    r.cached, r.host_hit = dev, host
    if r.prefix_id is None and not r.retracts:
        return
    c = inst.cache
    ls = r.prefix_len if r.prefix_id is not None else 0
    if ls and (dev >= ls or dev + host >= ls):
        key = ("p", r.prefix_id)
        if dev < ls:  # the prefix comes back from the host (HiCache load_back re-inserts it on the device)
            c.load_back(key, now)
            c.insert(key, ls, now, locked=True)
        else:
            c.lock(key, now)
        r.shared = ls // inst.page * inst.page
        r.pinned = True
    if c.enabled:
        c.load_back(("r", r.rid), now) if host else None
        c.take(("r", r.rid))


def release(inst, r: Req, now: float, keep_tokens: int, prio: float | None, touch_prefix: bool,
            finished: bool = False) -> None:
    """``r`` leaves the batch: ``keep_tokens`` of its private KV stay in the cache (evictable, eviction priority
    ``prio``, default now); its shared prefix is unlocked. A finished request's KV can never be matched again
    (its private tokens are its own): it is retired (same accounting, no per-request segment)."""
    c = inst.cache
    if c.enabled and keep_tokens > 0:
        if finished:
            c.retire(("r", r.rid), keep_tokens, now)
        else:
            c.insert(("r", r.rid), keep_tokens, now if prio is None else prio, locked=False)
    if r.pinned:
        c.unlock(("p", r.prefix_id), now, touch_prefix)
    r.shared, r.pinned = 0, False
