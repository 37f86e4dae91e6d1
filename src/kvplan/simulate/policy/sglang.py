"""SGLang's scheduler, step by step as ``Scheduler.get_next_batch_to_run`` runs it (0.5.9, pinned):
https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/managers/scheduler.py and
https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/managers/schedule_policy.py

* A prefill batch runs first whenever one can be formed (``get_new_batch_prefill``); prefill and decode are separate
  forwards (mixed chunk off). Nothing is tried while ``running_batch.batch_is_full`` is set: it is set when admission
  hits ``NO_TOKEN`` or the running cap, and cleared when the running batch shrinks (a finish or a retraction).
* Admission (``PrefillAdder.add_one_req``): a request fits when
  ``extend + min(max_new - out, CLIP) < available + evictable - Σ_running min(max_new - out, CLIP) × new_token_ratio
  - Σ_admitted (extend + min(max_new, CLIP))``; prompts longer than the chunk are split (``chunked_prefill_size``),
  a batch takes at most ``max_prefill_tokens``.
* Decode (``update_running_batch``): when the next step does not fit (``check_decode_mem``), ``retract_decode`` retracts
  the requests with the fewest output tokens (ties: longest prompt) until it does, sets
  ``new_token_ratio = min(1, (Σ out + 20 × bs) / (Σ max_new + 1))``; otherwise the ratio decays by ``decay`` per step
  to ``min_new_token_ratio``. A retracted request keeps its output and is prefilled again (prompt + output) from the
  back of the queue; its prompt stays in the radix tree unlocked (``release_kv_cache(is_insert=False)``).
"""

from __future__ import annotations

import heapq

from kvplan.simulate.core import prefix
from kvplan.simulate.core.instance import STEP, Instance
from kvplan.simulate.core.request import DONE, PREFILLING, WAITING, Req
from kvplan.simulate.policy.sglang_knobs import SGLangKnobs
from kvplan.simulate.policy.sglang_reserve import Reservation


class SGLangInstance(Instance):
    def setup(self, k: SGLangKnobs) -> None:
        self.k = k
        self.ratio = k.init_new_token_ratio
        self.min_ratio, self.decay = k.min_new_token_ratio, k.new_token_ratio_decay
        self.next_step_target = k.retract_to_next_step
        self.clip = k.clip_max_new_tokens
        self.full = False  # running_batch.batch_is_full
        self.chunked: Req | None = None
        self.batch: list[tuple[Req, int, bool]] = []
        self.victims: list = []  # (-birth, -prompt, tie, req): the retraction order
        self._tie = 0
        self.res = Reservation(self.clip)  # Σ min(max_new - gen, CLIP) over the running batch

    # ---- running-batch bookkeeping -------------------------------------------------------------------------
    def _join(self, r: Req) -> None:
        self.dec.add(r, self.step)
        self._tie += 1
        v = self.victims
        if not self._tie & 63 and len(v) > 2 * self.dec.B + 64:  # drop entries of requests that left
            members = self.dec.members
            v[:] = [e for e in v if e[3] in members]
            heapq.heapify(v)
        heapq.heappush(v, (-r.birth, -r.prompt, self._tie, r))
        self.res.join(r, self.step)

    def _leave(self, r: Req) -> None:
        self.dec.remove(r, self.step)
        self.res.leave(r)

    def _reserved(self) -> float:
        """Σ_running min(max_new - gen, CLIP) × new_token_ratio (``_get_running_request_total_token_offset``)."""
        return self.res.remaining(self.step) * self.ratio

    def on_decode_steps(self, n: int) -> None:
        r = self.ratio - n * self.decay
        self.ratio = r if r > self.min_ratio else self.min_ratio

    # ---- the scheduling point ------------------------------------------------------------------------------
    def schedule(self) -> None:
        free = self.settle_cache()
        if self.chunked is not None or (self.waiting and not self.full):
            if self._prefill(free):
                return
        d = self.dec
        if d.B == 0:
            self.plan_idle()
            return
        if (d.B if d.page == 1 else d.pages_needed_next(self.step)) > free:
            self._retract()
            free = self.free_pages()
            if d.B == 0:
                self.schedule()
                return
        # arrivals matter only if a prefill could be tried: queue empty and the batch not full
        self.plan_decode(free, not self.waiting and not self.full)

    def _prefill(self, free: int) -> bool:
        k, page = self.k, self.page
        avail = free * page  # available + evictable tokens
        rem_total = avail - self.res.remaining(self.step) * self.ratio
        cur_rem = avail
        rem_input = k.max_prefill_tokens
        rem_chunk = k.chunked_prefill_size
        batch: list[tuple[Req, int, bool]] = []
        ctx = 0
        host_tokens = new_tokens = aux = 0
        clip = self.clip
        if self.chunked is not None:  # add_chunked_req: always part of the batch
            r = self.chunked
            left = r.fill_len - r.computed
            cap = min(rem_chunk, int(rem_total)) if rem_chunk is not None else left
            if cap <= 0:
                cap = rem_chunk or left
            ext = min(left, cap)
            done = ext >= left
            batch.append((r, ext, done))
            ctx += r.computed + ext
            new_tokens += ext
            grab = -(-(r.computed + ext - r.shared) // page) - r.aux  # KV for the chunk is allocated now
            r.aux += grab
            aux += grab
            rem_total -= ext + (min(r.max_new, clip) if done else 0)
            cur_rem -= ext
            rem_input -= ext
            if rem_chunk is not None:
                rem_chunk -= ext
            self.chunked = None if done else r
        slots = self.max_running - self.dec.B
        waiting = self.waiting
        while waiting:
            if len(batch) >= slots:
                self.full = True
                break
            r = waiting[0]
            gen = r.gen
            if r.prefix_id is None and not r.retracts:  # a fresh request without a shared prefix matches nothing
                dev = host = lock_ev = 0
            else:
                dev, host, shared_ev, own_ev = prefix.lookup(self, r, whole_pages=False)
                lock_ev = shared_ev + own_ev
            ext = r.prompt + gen - dev
            left = r.max_new - gen  # >= 1 for a request that has not finished
            total = ext + (left if left < clip else clip)
            if total >= rem_total:
                self.full = True
                break
            ext -= host
            inp = ext if page == 1 else -(-ext // page) * page  # real_input_tokens (host hits are loaded)
            if inp >= rem_input and batch:
                break
            if lock_ev and total >= rem_total - lock_ev * page:  # the lock takes the matched prefix out of evictable
                self.full = True
                break
            if rem_chunk is not None and inp > rem_chunk:
                trunc = rem_chunk // page * page
                if trunc <= 0:
                    break
                ext, done, reserve = trunc, False, 0
            else:
                done, reserve = True, min(r.max_new, clip)
            waiting.popleft()
            if r.prefix_id is not None or r.retracts:
                prefix.claim(self, r, dev, host, self.t)
                host_tokens += host
            # (a fresh request without a shared prefix keeps its defaults: nothing shared, cached or loaded)
            self.sink.admitted(r, self.t, r.prompt + gen, dev, host, ext)
            computed = r.computed = dev + host
            r.state = PREFILLING
            batch.append((r, ext, done))
            ctx += computed + ext
            new_tokens += ext
            grab = (computed + ext - r.shared if page == 1 else -(-(computed + ext - r.shared) // page)) - r.aux
            r.aux += grab  # KV for the new tokens (and what came back from the host) is allocated now
            aux += grab
            rem_total -= inp + reserve + lock_ev * page
            cur_rem -= inp
            rem_input -= inp
            if rem_chunk is not None:
                rem_chunk -= inp
            if not done:
                self.chunked = r
                break
            if rem_total <= 0 or cur_rem <= 0:
                self.full = True
                break
            if rem_input <= 0 or (rem_chunk is not None and rem_chunk <= 0):
                break
        if not batch:
            return False
        self.aux_pages += aux
        self.batch = batch
        t = self.model.step(0, ctx, new_tokens, prefill_batch=True)
        if host_tokens:
            t += self.host_load_s(host_tokens)
        self.kind, self.interruptible, self.next_t, self.planned = STEP, False, self.t + t, True
        return True

    def finish_step(self) -> list[Req]:
        """The prefill forward ends: finished prefills sample their first token and join the running batch."""
        t1 = self.next_t
        self._occupy(t1, flush=False)
        self.t = t1
        out: list[Req] = []
        gen = 0
        new = 0
        for r, ext, done in self.batch:
            r.computed += ext
            new += ext
            if not done:
                continue
            self.aux_pages -= r.aux
            r.aux = 0
            if r.prefix_id is not None and not r.pinned and r.prefix_len:  # the tree now holds the prefix
                self.cache.insert(("p", r.prefix_id), r.prefix_len, t1, locked=True)
                r.shared, r.pinned = r.prefix_len // self.page * self.page, True
            if self.cache.host_cap:
                self.cache.host_write(("r", r.rid), r.computed - r.shared, t1)
            r.t_prefill = t1
            r.gen += 1
            gen += 1
            if r.t_first < 0:
                self.sink.first_token(r, t1)
            if r.gen >= r.output:
                r.state = WAITING
                self._release(r, finished=True)
                out.append(r)
            else:
                self._join(r)
        self.batch = []
        self.add_tokens(gen, new)
        self.maybe_flush()
        if out:
            self.full = False  # the prefill batch lost members (last_batch.filter_batch)
        return out

    # ---- leaving the batch ---------------------------------------------------------------------------------
    def release_finished(self, r: Req) -> None:
        """A request sampled its last token: it leaves the batch and ``cache_finished_req`` inserts its sequence."""
        self._leave(r)
        if r.pinned or r.prefix_id is not None:
            self._release(r, finished=True)
        else:  # no shared prefix: its own sequence, retired into the cache
            if self.k.radix_cache:
                self.cache.retire(("r", r.rid), r.prompt + r.gen - 1, self.t)
            r.state = DONE
        self.full = False

    def _release(self, r: Req, finished: bool) -> None:
        if finished:  # cache_finished_req inserts the whole sequence (output included)
            keep = r.prompt + r.gen - 1 - r.shared if self.k.radix_cache else 0
            prefix.release(self, r, self.t, keep, None, touch_prefix=True, finished=True)
            r.state = DONE
        else:  # retraction: only what the last prefill inserted stays, with that insert's access time
            keep = r.computed - r.shared if self.k.radix_cache else 0
            prefix.release(self, r, self.t, keep, r.t_prefill, touch_prefix=False)

    def _retract(self) -> None:
        """``ScheduleBatch.retract_decode``: retract until the next step fits (0.5.2+) or, up to 0.5.1, until
        ``RETRACT_DECODE_STEPS`` steps of every remaining request fit."""
        k = self.k
        n = 0
        while self.dec.B > 1:
            need = self.dec.pages_needed_next(self.step) if self.next_step_target else \
                -(-self.dec.B * k.retract_decode_steps // self.page)
            if n and need <= self.free_pages():
                break
            _, _, _, r = heapq.heappop(self.victims)
            if r not in self.dec.members:
                continue
            self._leave(r)
            self._release(r, finished=False)
            r.state, r.retracts, r.t_queued = WAITING, r.retracts + 1, self.t
            self.waiting.append(r)
            n += 1
            # release_req: evict remaining × RETRACT_DECODE_STEPS tokens from the tree at once
            want = -(-self.dec.B * k.retract_decode_steps // self.page)
            short = want - (self.cap_pages - self.held_pages() - self.cache.evictable_pages)
            if short > 0:
                self.cache.evict(short, self.t)
        if self.dec.B == 1 and self.dec.pages_needed_next(self.step) > self.free_pages():
            r = next(iter(self.dec.members))  # 0.5.23 aborts it; 0.5.9 raises: the request is lost either way
            self._leave(r)
            self._release(r, finished=False)
            r.state = DONE
            self.sink.aborted_req(r, self.t)
            self.dropped.append(r)
        if n:
            self.sink.preemptions += n
            self.sink.preempt_events += 1
            B = self.dec.B
            decoded = B * self.step - self.res.sum_birth
            self.ratio = min(1.0, (decoded + k.retract_decode_steps * B) / (self.res.sum_max_new + 1))
            self.full = False
