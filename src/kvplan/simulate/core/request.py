"""One request in flight: its lengths, where it is, and the times its latencies are measured from.

Only live requests exist as objects (waiting, running, or held by a closed-loop client), so memory stays flat in
the number of requests a job has. Lengths are tokens; times are seconds of simulated wall clock.

Token bookkeeping follows both engines: after the prefill forward the KV holds the prompt and the first output
token is sampled (``gen = 1``); each decode step stores the last token's KV and samples one more. Before a decode
step a request holds ``kv_len = prompt + gen - 1`` tokens and needs a new page when ``kv_len % page == 0``
(SGLang ``ScheduleBatch.new_tokens_required_next_decode``; vLLM ``KVCacheManager.allocate_slots`` for one token).
"""

from __future__ import annotations

WAITING, PREFILLING, RUNNING, DONE = 0, 1, 2, 3


class Req:
    __slots__ = ("rid", "arrival", "prompt", "output", "max_new", "prefix_id", "prefix_len", "client",
                 "state", "gen", "birth", "t_first", "seq", "computed", "cached", "host_hit", "retracts",
                 "instance", "shared", "pinned", "aux", "t_prefill", "t_queued")

    def __init__(self, rid: int, arrival: float, prompt: int, output: int, max_new: int | None = None,
                 prefix_id: int | None = None, prefix_len: int = 0, client: int = -1):
        # lengths are whole tokens >= 1 (the workload readers check them)
        self.rid = rid
        self.arrival = arrival
        self.prompt = prompt
        self.output = output
        self.max_new = max_new if (max_new and max_new > output) else output
        self.prefix_id = prefix_id
        self.prefix_len = (prefix_len if prefix_len < prompt else prompt - 1) if prefix_id is not None else 0
        self.client = client
        self.state = WAITING
        self.gen = 0  # output tokens sampled so far (kept across SGLang retraction and vLLM preemption)
        self.birth = 0  # decode-step index at which gen would be 0: gen = step - birth while running
        self.t_first = -1.0  # time the first output token was sampled
        self.seq = 0  # admission order (vLLM preempts the most recently admitted)
        self.computed = 0  # tokens whose KV is computed in the current admission (prefill progress)
        self.cached = 0  # tokens matched in the device prefix cache at this admission
        self.host_hit = 0  # tokens loaded back from the host tier at this admission
        self.retracts = 0  # retractions / preemptions suffered
        self.instance = -1
        self.shared = 0  # tokens of its KV held by a locked shared-prefix segment (not its private pages)
        self.pinned = False  # holds a lock on its shared-prefix segment
        self.aux = 0  # pages it holds while its prefill is in progress
        self.t_prefill = 0.0  # time its last prefill completed (SGLang: the tree insert that set its access time)
        self.t_queued = arrival  # when it last joined the waiting queue

    @property
    def fill_len(self) -> int:
        """Tokens an admission prefills (prompt + output sampled so far: SGLang ``fill_ids = origin_input_ids +
        output_ids``, vLLM ``num_tokens``); the forward samples one more token."""
        return self.prompt + self.gen

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Req({self.rid}, P={self.prompt}, L={self.output}, gen={self.gen}, state={self.state})"
