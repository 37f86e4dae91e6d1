"""What SGLang's admission reserves for the running batch, in closed form.

``PrefillAdder._get_running_request_total_token_offset`` (0.5.9) sums, over the running requests,
``min(max_new_tokens - len(output_ids), CLIP_MAX_NEW_TOKENS)`` (times the new-token ratio, applied by the caller).
With ``gen = step - birth`` every term falls by one per decode step until it is no longer clipped, so the sum is

    CLIP × (clipped members) + Σ_unclipped (max_new + birth) - (unclipped members) × step

where a member is clipped while ``step < max_new + birth - CLIP`` (a heap of those thresholds moves members over as
the steps pass). The same bookkeeping gives ``retract_decode``'s new ratio: Σ gen = B × step - Σ birth, Σ max_new.
"""

from __future__ import annotations

import heapq

from kvplan.simulate.core.request import Req


class Reservation:
    __slots__ = ("clip", "heap", "clipped", "unclip_sum", "n_unclipped", "sum_birth", "sum_max_new", "_tie")

    def __init__(self, clip: int):
        self.clip = clip
        self.heap: list = []  # (step at which max_new - gen drops to CLIP, tie, req)
        self.clipped: set[Req] = set()
        self.unclip_sum = 0  # Σ (max_new + birth) over unclipped members
        self.n_unclipped = 0
        self.sum_birth = 0
        self.sum_max_new = 0
        self._tie = 0

    def join(self, r: Req, step: int) -> None:
        u = r.max_new + r.birth - self.clip
        if step < u:
            self._tie += 1
            self.clipped.add(r)
            heapq.heappush(self.heap, (u, self._tie, r))
        else:
            self.unclip_sum += r.max_new + r.birth
            self.n_unclipped += 1
        self.sum_birth += r.birth
        self.sum_max_new += r.max_new

    def leave(self, r: Req) -> None:
        if r in self.clipped:
            self.clipped.discard(r)
        else:
            self.unclip_sum -= r.max_new + r.birth
            self.n_unclipped -= 1
        self.sum_birth -= r.birth
        self.sum_max_new -= r.max_new

    def remaining(self, step: int) -> int:
        """Σ_running min(max_new - gen, CLIP) at ``step``."""
        h = self.heap
        if not h:  # nobody asks for more than CLIP new tokens
            return self.unclip_sum - self.n_unclipped * step
        while h and h[0][0] <= step:
            _, _, r = heapq.heappop(h)
            if r in self.clipped:
                self.clipped.discard(r)
                self.unclip_sum += r.max_new + r.birth
                self.n_unclipped += 1
        return self.clip * len(self.clipped) + self.unclip_sum - self.n_unclipped * step
