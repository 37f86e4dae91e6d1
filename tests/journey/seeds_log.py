"""An SGLang 0.5.9 serving log of the incident, written from the seeds' own figures (../shared/seeds), for the
end-to-end journey tests. Not a copy of tests/diagnose/incident_log.py: its serving lines pair the batch and the
throughput the way an engine does.

The seeds' figures (001, 004): Kimi-K2.5 on 8 RTX PRO 6000 Blackwell, TP8, ``--mem-fraction-static 0.85``;
``max_total_num_tokens=116171``; 780-890 tok/s with 46-56 requests running and 94-101 waiting (150 clients);
token usage 0.85-0.96 ("KV cache saturation"); CUDA graphs 3.75 GB per rank; requests of short instructions and
~4,000-token generations (EAGLE-3 training data). The startup lines use the engine's 0.5.9 formats
(``model_runner.py``: "Load weight begin. avail mem=", "KV Cache is allocated. #tokens:", ``scheduler.py``
``max_total_num_tokens=``) with a free-memory baseline P and weights that reproduce the 116,171 tokens at 0.85 with
the 70,272 B/token MLA cell: ``0.85 P - weights`` = 7.60 GiB.

Serving lines (``scheduler_metrics_mixin.log_decode_stats``: one "Decode batch" line every 40 decode steps; "Prefill
batch" lines as requests are admitted): the seeds give the ranges of the running count and of the generation rate,
not their pairing. A decode step reads the weights and every running request's KV, so the rate rises with the
batch, less than in proportion: each line's rate is placed in the seeds' range by its running count (46 -> 780,
56 -> 890 tok/s) with ±2 % noise. Usage is drawn in the seeds' 0.85-0.96 and ``#token = usage × pool``; a new
request is admitted about every 5 s (830 tok/s / ~4,000 tokens per request = 0.21 requests/s) with a ~300-token
prompt (uniform 150-450) and nothing cached.
"""

from __future__ import annotations

import random
from pathlib import Path

POOL, CELL = 116_171, 70_272
P_GIB, WEIGHTS_GIB = 93.47, 71.85
RUNNING, QUEUED, TPS, USAGE = (46, 56), (94, 101), (780.0, 890.0), (0.85, 0.96)
CLIENTS = 150
GPU = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
LAUNCH = ("python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 --mem-fraction-static 0.85 "
          "--trust-remote-code")
INCIDENT = LAUNCH + " --enable-hierarchical-cache --hicache-size 300"  # the launch that hung the box (per rank!)
FIXED = LAUNCH.replace("0.85", "0.88") + " --enable-hierarchical-cache --hicache-size 48"  # what ran at 930-1,350


def _ts(t: float) -> str:
    s = int(t)
    return f"2026-02-24 {9 + s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def lines(decode_lines: int = 120, seed: int = 11) -> list[str]:
    rnd = random.Random(seed)
    out = [f"[{_ts(0)}] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', "
           "tokenizer_path='moonshotai/Kimi-K2.5', trust_remote_code=True, dtype='auto', kv_cache_dtype='auto', "
           "quantization=None, context_length=None, "
           "device='cuda', mem_fraction_static=0.85, max_running_requests=None, max_total_tokens=None, "
           "chunked_prefill_size=8192, max_prefill_tokens=16384, schedule_policy='fcfs', schedule_conservativeness=1.0,"
           " page_size=1, tp_size=8, pp_size=1, dp_size=1, enable_dp_attention=False, "
           "enable_hierarchical_cache=False, hicache_ratio=2.0, hicache_size=0, cuda_graph_max_bs=None, "
           "disable_cuda_graph=False, decode_log_interval=40, host='127.0.0.1', port=30000)"]
    kv_gib = POOL * CELL / 2**30
    # req_to_token: 2048 request slots × (context 262,144 + 1) int32 = 2.0 GiB, and 0.17 GiB of other metadata
    pool_end = P_GIB - WEIGHTS_GIB - kv_gib - 2048 * 262_145 * 4 / 2**30 - 0.17
    for r in range(8):
        out += [f"[{_ts(20)} TP{r}] Init torch distributed ends. mem usage=2.08 GB",
                f"[{_ts(21)} TP{r}] Load weight begin. avail mem={P_GIB:.2f} GB"]
    for r in range(8):
        out += [f"[{_ts(330)} TP{r}] Load weight end. elapsed=308.71 s, type=KimiK25ForConditionalGeneration, "
                f"dtype=torch.bfloat16, avail mem={P_GIB - WEIGHTS_GIB:.2f} GB, mem usage={WEIGHTS_GIB:.2f} GB.",
                f"[{_ts(331)} TP{r}] KV Cache is allocated. #tokens: {POOL}, KV size: {kv_gib:.2f} GB",
                f"[{_ts(331)} TP{r}] Memory pool end. avail mem={pool_end:.2f} GB",
                f"[{_ts(345)} TP{r}] Capture cuda graph end. Time elapsed: 13.82 s. mem usage=3.75 GB. avail mem="
                f"{pool_end - 3.75:.2f} GB."]
    out += [f"[{_ts(346)} TP0] max_total_num_tokens={POOL}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests=2048, context_len=262144, available_gpu_mem={pool_end - 3.75:.2f} GB",
            f"[{_ts(350)}] The server is fired up and ready to roll!"]
    t, next_admit = 4000.0, 4000.0
    for _ in range(decode_lines):
        running = rnd.randint(*RUNNING)
        frac = (running - RUNNING[0]) / (RUNNING[1] - RUNNING[0])
        tps = (TPS[0] + frac * (TPS[1] - TPS[0])) * rnd.uniform(0.98, 1.02)
        tps = min(TPS[1], max(TPS[0], tps))
        usage = rnd.uniform(*USAGE)
        queued = rnd.randint(*QUEUED)
        t += 40 * running / tps  # 40 decode steps of running/tps seconds each
        while next_admit < t:
            out.append(f"[{_ts(next_admit)} TP0] Prefill batch, #new-seq: 1, #new-token: {rnd.randint(150, 450)}, "
                       f"#cached-token: 0, token usage: {usage:.2f}, #running-req: {running - 1}, "
                       f"#queue-req: {queued + 1}")
            next_admit += rnd.uniform(3.0, 7.0)
        out.append(f"[{_ts(t)} TP0] Decode batch, #running-req: {running}, #token: {int(usage * POOL)}, "
                   f"token usage: {usage:.2f}, cuda graph: True, gen throughput (token/s): {tps:.2f}, "
                   f"#queue-req: {queued}")
    return out


def write(path: Path, **kw) -> Path:
    path.write_text("\n".join(lines(**kw)) + "\n")
    return path
