"""unknown (too few samples): a bottleneck is named only from a window of at least ``MIN_SAMPLES`` load samples
spanning at least ``MIN_SPAN_S`` seconds; below that the verdict is ``unknown`` and says what it had, not a guess.

Why these figures: a bottleneck is a steady state (requests waiting while the pool is full, a queue that does not
drain), and one or two readings cannot tell it from a burst. vLLM prints its stats line every 10 s
(``VLLM_LOG_STATS_INTERVAL``, https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/envs.py) and SGLang a decode
line every 40 decode steps (``decode_log_interval``, https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/
srt/server_args.py), so 3 samples over 10 s is the least either can show of a steady state; ``diagnose --url``
scrapes every 2 s of its default 30 s window. A window whose samples carry no timestamps (a pasted excerpt) is judged
on the count alone, and says so. Preemptions and retractions are exempt: the engine printing that it evicted
running requests is a fact about the pool, not a reading of a steady state. The verdicts the thin window leans to
are kept as secondary ("leans to"), never as the bottleneck.
"""

from __future__ import annotations

from kvplan.diagnose.rules import RuleContext, Verdict

ID = "unknown"
MIN_SAMPLES = 3
MIN_SPAN_S = 10.0
NEED = f"need ≥ {MIN_SAMPLES} samples over ≥ {MIN_SPAN_S:g} s"


def check(ctx: RuleContext) -> Verdict | None:
    """The ``unknown`` verdict when the window is too thin to name a bottleneck (None: enough, or no sample at all:
    the ``unknown`` rule says that)."""
    w = ctx.window
    n = w.n or len(w.prefills)
    if n == 0 or w.preemptions or w.retractions:
        return None  # no sample: the unknown rule says so; preemptions / retractions are events, not a reading
    span = w.span_s
    few = n < MIN_SAMPLES
    short = span is not None and span < MIN_SPAN_S
    if not (few or short):
        return None
    had = f"{n} sample{'s' if n != 1 else ''}" + (f" over {span:.0f} s" if span is not None else
                                                   " (no timestamps: span unknown)")
    why = f"too few samples to name a bottleneck: {had}; {NEED}"
    return Verdict(ID, why, "sample longer (--window S) or give the full log", (why + f" ({w.scope})",))
