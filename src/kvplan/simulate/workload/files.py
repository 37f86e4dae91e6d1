"""Workloads from files: a JSONL of requests, or the result file of a serving benchmark.

Request JSONL, one object per line (streamed):
    {"prompt_len": 1000, "output_len": 4000}                       required (aliases: input_len / prompt_tokens,
                                                                      output_tokens)
    "max_tokens": 8192        the request's max_new_tokens (default: output_len)
    "arrival": 12.5           seconds (aliases: timestamp, arrival_time): replayed as a trace; without it the
                              requests go as fast as --concurrency clients / --rate allow
    "prefix_id": "sys-a", "prefix_len": 700   a shared prefix (the same id shares the same first tokens)

Benchmark results (the last run of the file): SGLang ``python -m sglang.bench_serving --output-file`` (JSONL, one
result per line: ``bench_serving.py::benchmark``, v0.5.9) and vLLM ``benchmark_serving`` / ``vllm bench serve
--save-result`` (JSON: ``benchmarks/serve.py``, v0.10.2). Lengths are the per-request ``input_lens`` /
``output_lens`` when the file has them (``--output-details`` / ``--save-detailed``), else the random dataset's
``random_input_len`` / ``random_output_len`` / ``random_range_ratio``, else the means of the totals; arrivals follow
``request_rate`` (Poisson, vLLM ``burstiness`` as the gamma shape; "inf": all at once) capped by
``max_concurrency``. What the benchmark measured is kept for a side-by-side comparison.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kvplan import validate
from kvplan.errors import KvplanError
from kvplan.simulate.workload.generate import sampler
from kvplan.simulate.workload.spec import Item, Workload

MAX_JSON_BYTES = 512 << 20
_P = ("prompt_len", "input_len", "prompt_tokens", "input_tokens")
_O = ("output_len", "output_tokens")
_T = ("arrival", "timestamp", "arrival_time")


def _first(d: dict, keys: tuple[str, ...]) -> Any:
    for k in keys:
        if d.get(k) is not None:
            return d[k]
    return None


def _int(v: Any, what: str, where: str, lo: int = 1) -> int:
    """A count from the file (a fractional one is truncated, as int() did): validate.number's bounds."""
    return int(validate.number(f"{where}: {what}", v, lo=lo, hi=validate.MAX_TOKENS, hint="a number of tokens"))


def _num(v: Any, what: str, where: str, lo: float = 0.0, hi: float = 1e12) -> float:
    return float(validate.number(f"{where}: {what}", v, lo=lo, hi=hi))


def _json(text: str, where: str) -> Any:
    """One JSON value of the file (validate.json_value's bounds); None when it is not JSON at all."""
    try:
        return validate.json_value(text, where)
    except validate.BoundExceeded:
        raise
    except KvplanError:
        return None


def _item(d: Any, where: str, ids: dict) -> Item:
    if not isinstance(d, dict):
        raise KvplanError(f"{where}: expected a JSON object per line")
    p, o = _first(d, _P), _first(d, _O)
    mx = d.get("max_tokens", d.get("max_new_tokens"))
    if o is None and mx is not None:
        o = mx
    if p is None or o is None:
        raise KvplanError(f"{where}: a request needs prompt_len and output_len",
                          "see the formats at the end of `kvplan simulate --help`")
    t = _first(d, _T)
    if t is not None:
        t = validate.seconds(f"{where}: arrival", t, hi=1e9, hint="seconds from the start")
    pid = d.get("prefix_id")
    plen = _int(d["prefix_len"], "prefix_len", where) if (pid is not None and d.get("prefix_len")) else 0
    key = ids.setdefault(str(pid), len(ids)) if pid is not None else None
    return Item(_int(p, "prompt_len", where), _int(o, "output_len", where),
                _int(mx, "max_tokens", where) if mx is not None else None, key, plen, t)


def _scan(path: Path) -> tuple[int, bool]:
    """(requests, timed?) of a request JSONL, streamed."""
    n, timed = 0, None
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip():
                n += 1
                if timed is None:
                    d = _json(line, f"{path}:{n}")
                    if not isinstance(d, dict):
                        raise KvplanError(f"{path}:{n}: not a JSON object", "one JSON object per line")
                    timed = _first(d, _T) is not None
    return n, bool(timed)


def request_jsonl(path: Path, concurrency: int | None, rate: float | None, burstiness: float, seed: int) -> Workload:
    n, timed = _scan(path)
    if n == 0:
        raise KvplanError(f"{path}: no requests")

    def stream() -> Iterator[Item]:
        ids: dict = {}
        last = 0.0
        with path.open("r", encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                d = _json(line, f"{path}:{i}")
                if d is None:
                    raise KvplanError(f"{path}:{i}: not JSON", "one JSON object per line")
                it = _item(d, f"{path}:{i}", ids)
                if it.arrival is not None:
                    if it.arrival < last:
                        raise KvplanError(f"{path}:{i}: arrivals must not go back in time")
                    last = it.arrival
                yield it

    return Workload(name=path.name, stream_factory=stream, total=n, concurrency=concurrency, rate=rate,
                    burstiness=burstiness, seed=seed, description={"kind": "jsonl", "file": str(path),
                                                                   "timed": timed})


def _last_json(path: Path) -> dict:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise KvplanError(f"{path}: larger than {MAX_JSON_BYTES >> 20} MiB")
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    d = _json(text, str(path))
    if d is not None:
        return d if isinstance(d, dict) else {}
    last: dict = {}
    for i, line in enumerate(text.splitlines(), 1):  # SGLang appends one result per line; vLLM --append-result too
        line = line.strip()
        if line:
            v = _json(line, f"{path}:{i}")
            if isinstance(v, dict):
                last = v
    return last


def is_bench_result(d: dict) -> bool:
    return isinstance(d, dict) and "completed" in d and ("total_input_tokens" in d or "input_lens" in d)


def _measured(d: dict, key: str) -> float | None:
    """A figure the benchmark measured: a finite number >= 0, else None (left out, never an error)."""
    v = d.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < 1e15:
        return float(v)
    return None


def _ms(d: dict, key: str) -> float | None:
    v = _measured(d, key)
    return round(v / 1000, 6) if v is not None else None


def bench_result(path: Path, d: dict, seed: int) -> Workload:
    where = str(path)
    n = _int(d.get("completed") or d.get("num_prompts"), "completed", where)
    ins, outs = d.get("input_lens"), d.get("output_lens")
    rate = d.get("request_rate")
    rate = None if rate in (None, "inf", "trace") or (isinstance(rate, float) and math.isinf(rate)) else \
        _num(rate, "request_rate", where, hi=1e9)
    conc = d.get("max_concurrency")
    conc = _int(conc, "max_concurrency", where) if conc else None
    if rate is None and conc is None:
        conc = n  # every request sent at once
    if isinstance(ins, list) and isinstance(outs, list) and ins and len(ins) == len(outs):
        lens_in = [_int(a, "input_lens[]", where, lo=0) for a in ins]
        lens_out = [_int(b, "output_lens[]", where, lo=0) for b in outs]
        pairs = [(a, b) for a, b in zip(lens_in, lens_out, strict=True) if a > 0 and b > 0]
        lens = f"{len(pairs)} per-request lengths from the file"

        def stream() -> Iterator[Item]:
            for p, o in pairs:
                yield Item(p, o)
        n = len(pairs)
    else:
        pin, pout = d.get("random_input_len"), d.get("random_output_len")
        dataset = d.get("dataset_name", "random")
        if pin and pout and isinstance(dataset, str) and dataset.startswith("random"):
            r = _num(d.get("random_range_ratio") or 0.0, "random_range_ratio", where, hi=1.0)
            spec, pm, om = f"range:{r}", _int(pin, "random_input_len", where), _int(pout, "random_output_len", where)
            lens = f"random dataset: {pm} in / {om} out tokens, range ratio {r}"
        else:
            total_in = _num(d.get("total_input_tokens", 0), "total_input_tokens", where, hi=1e15)
            total_out = _num(d.get("total_output_tokens", 0), "total_output_tokens", where, hi=1e15)
            pm = min(validate.MAX_TOKENS, max(1, round(total_in / n)))
            om = min(validate.MAX_TOKENS, max(1, round(total_out / n)))
            spec, lens = "fixed", f"mean lengths from the totals ({pm} in, {om} out)"

        def stream() -> Iterator[Item]:
            import random

            rnd = random.Random(seed)
            sp, so = sampler(spec, pm, rnd), sampler(spec, om, rnd)
            for _ in range(n):
                yield Item(sp(), so())
    measured = {"duration_s": _measured(d, "duration"), "output_tps": _measured(d, "output_throughput"),
                "request_throughput": _measured(d, "request_throughput"),
                "ttft_s": {"mean": _ms(d, "mean_ttft_ms"), "p50": _ms(d, "median_ttft_ms"),
                           "p99": _ms(d, "p99_ttft_ms")},
                "tpot_s": {"mean": _ms(d, "mean_tpot_ms"), "p50": _ms(d, "median_tpot_ms"),
                           "p99": _ms(d, "p99_tpot_ms")},
                "e2e_s": {"mean": _ms(d, "mean_e2e_latency_ms") or _ms(d, "mean_e2el_ms"),
                          "p50": _ms(d, "median_e2e_latency_ms") or _ms(d, "median_e2el_ms"),
                          "p99": _ms(d, "p99_e2e_latency_ms") or _ms(d, "p99_e2el_ms")}}
    kind = "sglang bench_serving" if "backend" in d or "random_input_len" in d else "vllm benchmark_serving"
    return Workload(name=path.name, stream_factory=stream, total=n, concurrency=conc, rate=rate,
                    burstiness=_num(d.get("burstiness") or 1.0, "burstiness", where, hi=1e6), seed=seed,
                    description={"kind": kind, "file": str(path), "lengths": lens}, measured=measured)


def load_file(path_str: str, concurrency: int | None = None, rate: float | None = None, burstiness: float = 1.0,
              seed: int = 0) -> Workload:
    from kvplan import validate

    path = Path(validate.path("--workload", path_str, hint="a JSONL of requests or a benchmark result"))
    try:
        found = path.is_file()
    except OSError as e:
        raise KvplanError(f"{path}: cannot read ({e.strerror})") from None
    if not found:
        raise KvplanError(f"workload file not found: {path_str}")
    with path.open("r", encoding="utf-8", errors="replace") as f:
        head = f.read(4096).lstrip()
    if not head:
        raise KvplanError(f"{path}: empty workload file")
    first = head.splitlines()[0] if head else ""
    d = _json(first, f"{path}:1")
    if d is None or is_bench_result(d):
        res = _last_json(path)
        if not is_bench_result(res):
            raise KvplanError(f"{path}: neither a JSONL of requests nor a bench_serving/benchmark_serving result",
                              "see the formats at the end of `kvplan simulate --help`")
        return bench_result(path, res, seed)
    return request_jsonl(path, concurrency, rate, burstiness, seed)
