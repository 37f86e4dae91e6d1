"""Serving-stats lines -> samples: the logcorpus throughput cases (raw files vs the jsonl's samples) and the
literal examples of the references (sglang-memory.md §3.2, vllm-lmcache-memory.md §4.6)."""

from __future__ import annotations

import pytest

from kvplan.diagnose.stats import parse_line, parse_samples, to_corpus
from tests.conftest import CORPUS, corpus_jsonl

CASES = corpus_jsonl("throughput.jsonl")
# Where the jsonl records something its raw excerpt does not print (checked by hand against the raw files):
KNOWN = {
    "tp-club3090-105-qwen36-27b-autoround-2x3090": ("spec_mean_accept_len", "2nd sample's 2.72 is not in the excerpt"),
    "tp-qwen3vl-1378-qwen25-vl-7b-a100-v091": ("max_concurrency_reported", "from the user's prose, not a stats line"),
    "tp-ttvllm-55-llama32-11b-vision-tenstorrent": ("cpu_kv_usage_pct", "the jsonl leaves out the printed 0.0 %"),
}


def _parsed(case: dict) -> list[dict]:
    lines = (CORPUS / case["raw_file"]).read_text().splitlines()
    return [to_corpus(s) for s in parse_samples(lines) if s.kind in ("decode", "stats")]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_corpus_samples_equal_the_jsonl(case, corpus):
    got = _parsed(case)
    want = case["samples"]
    drop = KNOWN.get(case["id"], (None,))[0]
    strip = (lambda d: {k: v for k, v in d.items() if k != drop}) if drop else (lambda d: d)
    it = iter([strip(g) for g in got])  # the jsonl keeps a subset of the lines (e.g. 3 of 5), in order
    assert all(any(strip(w) == g for g in it) for w in want), (got, want)
    if case["id"] == "tp-vllm-6737-qwen2-0.5b-h800-v042":
        assert len(got) == 5  # every stats line of the excerpt


def test_spec_decoding_line_joins_the_stats_line_before_it():
    case = next(c for c in CASES if c["id"] == "tp-club3090-613-qwen27b-nvfp4-5090")
    got = _parsed(case)
    assert [g.get("spec_mean_accept_len") for g in got] == [2.68, None]  # the 2.89 line precedes any stats line


SGLANG_LITERALS = [
    ("[2025-05-14 09:33:51] Prefill batch. #new-seq: 3, #new-token: 3, #cached-token: 12019, token usage: 0.07, "
     "#running-req: 5, #queue-req: 0", dict(kind="prefill", new_seq=3, new_tokens=3, cached_tokens=12019,
                                            usage=0.07, running=5, queued=0)),
    ("[2026-04-05 20:02:48] Prefill batch, #new-seq: 1, #new-token: 148, #cached-token: 0, token usage: 0.08, "
     "#running-req: 31, #queue-req: 0, cuda graph: True, input throughput (token/s): 2074.38",
     dict(kind="prefill", new_tokens=148, running=31, queued=0, cuda_graph=True, prompt_tps=2074.38)),
    ("[2026-08-23 09:09:50 TP0 EP0] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, full token "
     "usage: 0.01, swa token usage: 0.01, #running-req: 0, #queue-req: 1, #pending-token: 46401, cuda graph: False, "
     "input throughput (token/s): 8072.80", dict(kind="prefill", usage=0.01, queued=1, source="TP0 EP0")),
    ("[2026-07-04 04:31:24 TP0] Prefill batch, #new-seq: 12, #new-token: 43008, #cached-token: 0, full token usage: "
     "0.14, mamba usage: 0.20, #running-req: 1, #queue-req: 97, #pending-token: 109585, npu graph: False, input "
     "throughput (token/s): 15734.14", dict(kind="prefill", usage=0.20, running=1, queued=97, cuda_graph=False)),
    ("Decode batch. #running-req: 233, #token: 370959, token usage: 0.82, cuda graph: True, gen throughput "
     "(token/s): 4594.01, #queue-req: 317", dict(kind="decode", running=233, tokens=370959, usage=0.82,
                                                 gen_tps=4594.01, queued=317, t=None)),
    ("[2025-03-14 02:16:14 TP0] Decode batch. #running-req: 509, #token: 180776, token usage: 0.43, gen throughput "
     "(token/s): 7897.87, largest-len: 0, #queue-req: 0,", dict(running=509, tokens=180776, queued=0, source="TP0")),
    ("[2026-07-21 15:00:13 TP0 EP0] Decode batch, #running-req: 24, #token: 233600, token usage: 0.66, accept len: "
     "3.05, accept rate: 0.68, npu graph: True, gen throughput (token/s): 239.06, #queue-req: 2",
     dict(running=24, accept_len=3.05, gen_tps=239.06, queued=2, cuda_graph=True)),
    ("Decode batch, #running-req: 8, #full token: 1000, full token usage: 0.30, #swa token: 500, swa token usage: "
     "0.45, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0", dict(tokens=1000, usage=0.45)),
    ("[2026-01-01 00:00:00 DP1 TP8] KV cache pool is full. Retract requests. #retracted_reqs: 3, "
     "#new_tokens_gained: 4096, #new_token_ratio: 0.7 -> 1.0", dict(kind="retract", retracted=3, source="DP1 TP8")),
]
VLLM_LITERALS = [
    ("(APIServer pid=3646) INFO 05-19 10:13:11 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
     "Avg generation throughput: 1055.3 tokens/s, Running: 18 reqs, Waiting: 43 reqs, GPU KV cache usage: 95.9%, "
     "Prefix cache hit rate: 0.0%", dict(fmt="vllm-v1", running=18, queued=43, gen_tps=1055.3, prefix_hit=0.0,
                                          source="Engine 000")),
    ("(APIServer pid=92107) INFO 05-08 16:21:55 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
     "Avg generation throughput: 28.4 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix "
     "cache hit rate: 0.0%, MM cache hit rate: 0.0%", dict(running=0, usage=0.0)),
    ("INFO 02-28 21:48:18 metrics.py:161] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 44.9 "
     "tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 82.1%, CPU KV cache usage: "
     "0.0%", dict(fmt="vllm-v0", running=2, swapped=0, queued=3, host_usage=0.0)),
    ("(APIServer pid=1) INFO 11-29 09:00:00 [loggers.py:259] Engine 001: Avg prompt throughput: 10.0 tokens/s, Avg "
     "generation throughput: 20.0 tokens/s, Running: 4 reqs, Waiting: 2 reqs, Preemptions: 3, CPU KV cache usage: "
     "99.1%, Prefix cache hit rate: 12.5%, External prefix cache hit rate: 50.0%",
     dict(preemptions=3, source="Engine 001", prefix_hit=0.125, external_hit=0.5, host_usage=None)),
    ("WARNING 06-16 21:24:15 scheduler.py:1089] Sequence group 165 is preempted by PreemptionMode.SWAP mode because "
     "there is not enough KV cache space. total_num_cumulative_preemption=151",
     dict(kind="preempt", preemptions=1, cumulative_preemptions=151)),
]


@pytest.mark.parametrize("line,want", SGLANG_LITERALS + VLLM_LITERALS)
def test_reference_literals(line, want):
    s = parse_line(line)
    assert s is not None
    for k, v in want.items():
        got = getattr(s, k)
        assert got == pytest.approx(v) if isinstance(v, float) else got == v, (k, got, v)


def test_usage_pct_of_v1_cpu_line_is_the_device_pool():
    s = parse_line(VLLM_LITERALS[3][0])
    assert s.usage == pytest.approx(0.991) and s.queued == 2


@pytest.mark.parametrize("junk", ["", "Decode batch", "Decode batchy stuff", "Decode batch. #running-req: x",
                                  "Avg generation throughput: nan tokens/s", "\x00\xff" * 100, "Running: 5 reqs",
                                  "Prefill batch, " + "#a: 1, " * 5000, None, 42])
def test_never_raises(junk):
    # junk gives no number (at most a sample of its kind with every figure unknown: "nan" is not a throughput) ...
    s = parse_line(junk)  # type: ignore[arg-type]
    numbers = ("running", "queued", "usage", "gen_tps", "prompt_tps", "tokens", "preemptions", "prefix_hit")
    assert s is None or all(getattr(s, k) is None for k in numbers), s
    # ... and the good line after it is still read
    got = parse_samples([junk, "Decode batch. #running-req: 1, #queue-req: 0"])  # type: ignore[list-item]
    assert [(x.running, x.queued) for x in got if x.running is not None or x.queued is not None] == [(1, 0)]
    assert got[-1].kind == "decode" and len(got) == (1 if s is None else 2)


def test_a_new_launch_restarts_the_samples():
    lines = ["[2026-01-01 00:00:01 TP0] Decode batch. #running-req: 9, #token: 9, token usage: 0.50, "
             "gen throughput (token/s): 1.00, #queue-req: 9",
             "[2026-01-01 00:01:00] server_args=ServerArgs(model_path='x')",
             "[2026-01-01 00:02:00 TP0] Decode batch. #running-req: 1, #token: 5, token usage: 0.01, "
             "gen throughput (token/s): 2.00, #queue-req: 0"]
    got = parse_samples(lines)
    assert [s.running for s in got] == [1]


def test_time_and_rank_from_prefixes():
    s = parse_line("[2026-02-24 11:13:23 DP3 TP3] Decode batch, #running-req: 1, #queue-req: 0")
    t = parse_line("[2026-02-24 11:13:33 DP3 TP3] Decode batch, #running-req: 1, #queue-req: 0")
    assert s.source == "DP3 TP3" and t.t - s.t == 10
    v = parse_line("INFO 07-24 09:55:35 metrics.py:334] Avg prompt throughput: 0.0 tokens/s, Avg generation "
                   "throughput: 1970.3 tokens/s, Running: 241 reqs, Swapped: 0 reqs, Pending: 746 reqs, GPU KV cache "
                   "usage: 99.6%, CPU KV cache usage: 0.0%")
    w = parse_line("INFO 07-24 09:55:40 metrics.py:334] Avg generation throughput: 1.0 tokens/s")
    assert w.t - v.t == 5
