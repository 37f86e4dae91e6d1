"""Serving lines parse in linear time (issue #9, item 8): the ``_PAIR`` regex backtracked (a 32k-character
"Decode batch" line took 6 s, a 195 KB log 73 s). The hand parser gives the same pairs as the old regex on real
lines and on random ones, and the time of long adversarial lines grows with their length (a ratio within one run,
not a wall-clock bound: a busy machine slows both sides)."""

from __future__ import annotations

import math
import random
import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.diagnose.stats import parse_line, parse_samples
from kvplan.engines.sglang.serving import _num, _pairs  # SGLang's key: value pairs (the dialect's own parser)

OLD_PAIR = re.compile(r"([#A-Za-z][\w \-#/().]*?): (-?\d+(?:\.\d+)?%?|True|False|nan|inf)(?=,|\s|$)")  # the old one


def _old(line: str, pos: int) -> dict:
    return {k.strip(): _num(v) for k, v in OLD_PAIR.findall(line, pos)}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
                                        for x, y in zip(a.values(), b.values(), strict=True))


REAL = [
    "[2025-09-01 10:00:00 TP0] Decode batch, #running-req: 52, #token: 105715, token usage: 0.91, cuda graph: True, "
    "gen throughput (token/s): 850.25, #queue-req: 100, ",
    "[2025-09-01 10:00:00 DP1 TP8] Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.05, "
    "#running-req: 0, #queue-req: 3",
    "[2025-09-01 10:00:00 TP0] Decode batch, #running-req: 1, #full token: 85, full token usage: 0.00, #swa token: 85, "
    "swa token usage: 0.00, accept len: 2.53, cpu graph: False, gen throughput (token/s): 5.52, #queue-req: 0,",
]


def test_real_lines_give_the_same_pairs():
    for line in REAL:
        pos = line.find("batch") + 5
        assert _same(_pairs(line, pos), _old(line, pos)) and len(_pairs(line, pos)) >= 6


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "#", " ", ":", ": ", ",", ", ", ".", "-", "(", ")", "/", "0", "12", "3.5",
                                 "%", "True", "nan", "inf", "é", "\t", "[", "x y"]), max_size=30))
def test_random_lines_give_the_same_pairs(parts):
    line = "".join(parts)
    assert _same(_pairs(line, 0), _old(line, 0)), line


ADVERSARIAL = [  # each made of k repeats of a body the old regex backtracked on (k = 8: 32k characters)
    lambda k: "[2025-01-01 00:00:00 TP0] Decode batch, " + "a" * 4_000 * k,
    lambda k: "[2025-01-01 00:00:00 TP0] Decode batch, " + "a: x " * 1_000 * k,
    lambda k: "[2025-01-01 00:00:00 TP0] Prefill batch. " + "#a b" * 1_000 * k + ": 1",
    lambda k: "INFO 01-01 00:00:00 Avg generation throughput: 1.0 tokens/s, " + "a" * 4_000 * k,
    lambda k: "INFO 01-01 00:00:00 Avg prompt throughput: 1.0 tokens/s, " + "w " * 2_000 * k + "KV cache usage: 5%",
]


def _best(fn, arg, n: int = 5) -> float:
    """The least CPU time of n calls (after one to warm up): the work the code does, without the waits for a CPU
    that a busy machine adds to the wall clock."""
    fn(arg)
    best = math.inf
    for _ in range(n):
        t0 = time.process_time()
        fn(arg)
        best = min(best, time.process_time() - t0)
    return best


def test_long_adversarial_lines_take_time_in_proportion_to_their_length():
    # 8x the length, at most 24x the CPU time (linear: 5-8x; the old regex, quadratic and worse: 64x and more),
    # judged within this run on the process's CPU clock; the 1 ms is the timer's noise
    for make in ADVERSARIAL:
        short, long = make(1), make(8)
        assert _best(parse_line, long) < 24 * _best(parse_line, short) + 1e-3, long[:80]
    random.seed(9)
    logs = {k: [random.choice(ADVERSARIAL)(k)[: random.randint(12, 4_000) * k] for _ in range(12)] for k in (1, 8)}
    assert sum(map(len, logs[8])) > 150_000  # ~195 KB
    assert _best(parse_samples, logs[8], 3) < 24 * _best(parse_samples, logs[1], 3) + 1e-3


def test_nan_and_inf_in_a_line_are_left_out():
    s = parse_line("[2025-01-01 00:00:00 TP0] Decode batch, #running-req: 3, token usage: nan, "
                   "gen throughput (token/s): inf, #queue-req: 0")
    assert s.running == 3 and s.usage is None and s.gen_tps is None and s.queued == 0
