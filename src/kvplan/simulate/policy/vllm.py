"""vLLM V1's scheduler, one ``Scheduler.schedule()`` per step, as read in 0.32.0 (the engine this repo runs) and
0.20.0 (the same logic; pinned): https://github.com/vllm-project/vllm/blob/v0.20.0/vllm/v1/core/sched/scheduler.py,
https://github.com/vllm-project/vllm/blob/v0.20.0/vllm/v1/core/kv_cache_manager.py (``allocate_slots``) and
https://github.com/vllm-project/vllm/blob/v0.20.0/vllm/v1/core/block_pool.py (free queue order)

* One step mixes decodes and prefill chunks under ``max_num_batched_tokens``. Running requests go first, in
  admission order: each gets its next token (or the rest of its prompt, up to the budget) and
  ``allocate_slots``; when the blocks are not there, the *last* running request is preempted (``self.running.pop()``),
  its blocks freed (``_preempt_request``: ``num_computed_tokens = 0``, back to the *front* of the waiting queue), until
  the step fits. Recompute: the request is prefilled again (prompt + output), minus what the prefix cache still has.
* Waiting requests are admitted only in a step without preemption, FCFS, while the budget lasts and fewer than
  ``max_num_seqs`` run, if ``allocate_slots(full_sequence_must_fit=True)`` finds blocks for the whole sequence (0.20+;
  earlier: for the first chunk). No output is reserved.
* Freed blocks keep their hashes until reallocated (prefix caching): a resumed request finds the blocks of its own
  sequence that survived, whole blocks only.
"""

from __future__ import annotations

import heapq

from kvplan.simulate.core import prefix
from kvplan.simulate.core.instance import Instance
from kvplan.simulate.core.request import DONE, PREFILLING, RUNNING, WAITING, Req
from kvplan.simulate.policy.vllm_knobs import VLLMKnobs


class VLLMInstance(Instance):
    def setup(self, k: VLLMKnobs) -> None:
        self.k = k
        self.prefilling: list[Req] = []  # running requests whose prompt is not all computed, admission order
        self.victims: list = []  # (-seq, req): running[-1] first
        self.seq = 0
        self.plan_pre: list[tuple[Req, int]] = []

    def _running(self) -> int:
        return self.dec.B + len(self.prefilling)

    def running_now(self) -> int:
        """``len(self.running)``: decoding and prefilling requests (``vllm:num_requests_running``)."""
        return self.dec.B + len(self.prefilling)

    # ---- the scheduling point ------------------------------------------------------------------------------
    def _grab(self, r: Req, n: int) -> int:
        """Pages ``r`` allocates to compute ``n`` more tokens (``allocate_slots``)."""
        return max(0, -(-(r.computed + n - r.shared) // self.page) - r.aux)

    def _running_plan(self) -> tuple[list[tuple[Req, int]], int, int]:
        budget = self.k.max_num_batched_tokens - self.dec.B
        chunks: list[tuple[Req, int]] = []
        need = self.dec.pages_needed_next(self.step)
        for r in self.prefilling:
            n = min(r.fill_len - r.computed, budget)
            if n > 0:
                chunks.append((r, n))
                need += self._grab(r, n)
                budget -= n
        return chunks, need, budget

    def schedule(self) -> None:
        self.settle_cache()
        k, page = self.k, self.page
        chunks, need, budget = self._running_plan()
        preempted = 0
        while need > self.free_pages():
            victim = self._victim()
            if victim is None:
                break
            self._preempt(victim)
            preempted += 1
            chunks, need, budget = self._running_plan()
        if preempted:
            self.sink.preemptions += preempted
            self.sink.preempt_events += 1
        else:
            free = self.free_pages() - need
            while self.waiting and budget > 0 and self._running() < k.max_num_seqs:
                r = self.waiting[0]
                dev, _, shared_ev, _ = prefix.lookup(self, r, whole_pages=True)
                n = r.fill_len - dev
                if not k.chunked_prefill and n > budget:
                    break
                n = min(n, budget)
                upto = r.fill_len if k.full_sequence_gate else dev + n
                shared = r.prefix_len // page * page if (r.prefix_id is not None and dev >= r.prefix_len) else 0
                if -(-(upto - shared) // page) + shared_ev > free:
                    break
                self.waiting.popleft()
                prefix.claim(self, r, dev, 0, self.t)
                self.sink.admitted(r, self.t, r.fill_len, dev, 0, r.fill_len - dev)
                r.computed, r.state = dev, PREFILLING
                self.seq += 1
                r.seq = self.seq
                v = self.victims
                if len(v) > 2 * self._running() + 64:  # drop entries of requests that left
                    v[:] = [e for e in v if e[2].seq == -e[0] and e[2].state in (PREFILLING, RUNNING)]
                    heapq.heapify(v)
                heapq.heappush(v, (-r.seq, r.rid, r))
                self.prefilling.append(r)
                grab = self._grab(r, n)
                free -= grab + shared_ev
                chunks.append((r, n))
                budget -= n
        if not chunks:
            if self.dec.B == 0:
                self.plan_idle()
                return
            # after a preemption the queue is tried again next step; otherwise a waiting request that does not
            # fit now cannot fit before a finish (blocks only shrink while decoding)
            n = 1 if (preempted and self.waiting) else max(1, self.decode_span_steps(self.free_pages()))
            self.plan_span(n, interruptible=not self.waiting)
            return
        tokens, ctx = 0, self.dec.kv_tokens(self.step)
        for r, n in chunks:
            grab = self._grab(r, n)
            r.aux += grab
            self.aux_pages += grab
            tokens += n
            ctx += r.computed + n
        self.plan_pre = chunks
        self.plan_step(self.model.step(self.dec.B, ctx, tokens, prefill_batch=False))

    def finish_step(self) -> list[Req]:
        """The mixed step ends: decoders gain a token, finished prefills sample their first one."""
        t1 = self.next_t
        self._occupy(t1, flush=False)
        B = self.dec.B
        self.step += 1
        self.t = t1
        if self.cache.evictable_pages:  # the step allocated its pages (evicting) before a finisher freed its own
            self.settle_cache()
        out = self.collect_finished()
        gen, new = B, 0
        for r, n in self.plan_pre:
            r.computed += n
            new += n
            if r.computed < r.fill_len:
                continue
            self.prefilling.remove(r)
            self.aux_pages -= r.aux
            r.aux = 0
            if r.prefix_id is not None and not r.pinned and r.prefix_len >= self.page:
                self.cache.insert(("p", r.prefix_id), r.prefix_len // self.page * self.page, t1, locked=True)
                r.shared, r.pinned = r.prefix_len // self.page * self.page, True
            r.gen += 1
            gen += 1
            if r.t_first < 0:
                self.sink.first_token(r, t1)
            if r.gen >= r.output:
                self._free(r, t1, finished=True)
                r.state = DONE
                out.append(r)
            else:
                self.dec.add(r, self.step)
        self.plan_pre = []
        self.add_tokens(gen, new)
        self.maybe_flush()
        return out

    # ---- leaving -------------------------------------------------------------------------------------------
    def release_finished(self, r: Req) -> None:
        self.dec.remove(r, self.step)
        self._free(r, self.t, finished=True)
        r.state = DONE

    def _free(self, r: Req, now: float, finished: bool = False) -> None:
        """Blocks go back to the free queue; full blocks keep their hash (evictable, last blocks first)."""
        kv = r.computed if r.state == PREFILLING else r.prompt + r.gen - 1
        keep = (kv - r.shared) // self.page * self.page if self.k.prefix_caching else 0
        prefix.release(self, r, now, keep, None, touch_prefix=True, finished=finished)

    def _victim(self) -> Req | None:
        """``self.running[-1]``: the most recently admitted running request."""
        h = self.victims
        while h:
            neg, _, r = heapq.heappop(h)
            if -neg != r.seq:
                continue
            if (r.state == PREFILLING and r in self.prefilling) or r in self.dec.members:
                victim: Req = r
                return victim
        return None

    def _preempt(self, r: Req) -> None:
        if r.state == PREFILLING:
            self.prefilling.remove(r)
            self.aux_pages -= r.aux
            r.aux = 0
            self._free(r, self.t)
        else:
            self.dec.remove(r, self.step)
            self._free(r, self.t)
        r.state, r.retracts, r.t_queued = WAITING, r.retracts + 1, self.t
        r.computed = 0
        self.waiting.appendleft(r)
