"""A synthetic SGLang 0.5.9 log of the incident (../shared/seeds), in the engine's exact line formats.

Numbers from the seeds: Kimi-K2.5 on 8 RTX PRO 6000 Blackwell, TP8, --mem-fraction-static 0.85; the KV pool held
116,171 tokens; ~850 tok/s with ~50 requests running (46-56) and ~100 queued (94-101); token usage 0.85-0.96;
CUDA graphs took 3.75 GB per rank. The free-memory baseline P (93.48 GiB per rank) and the weights (71.85 GiB per
rank) are chosen so that SGLang's own formula gives the 116,171 tokens at 0.85 with the 70,272 B/token MLA cell:
P - weights - 0.15 P = 7.61 GiB = 116,2xx tokens (the log's figure wins where they differ by rounding).
"""

from __future__ import annotations

import random
from pathlib import Path

POOL = 116_171
P_GIB, WEIGHTS_GIB = 93.48, 71.85
CMD = ("python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 --mem-fraction-static 0.85 "
       "--trust-remote-code --host 0.0.0.0 --port 30000")


def _ts(sec: int) -> str:
    return f"2026-02-24 {10 + sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"


def incident_lines(decode_lines: int = 30, seed: int = 7, sep: str = ",") -> list[str]:
    """``sep``: the separator after 'Decode batch' (',' in 0.5.x, '.' before; both are accepted)."""
    rnd = random.Random(seed)
    out = [f"[{_ts(0)}] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', tokenizer_path='moonshotai/"
           "Kimi-K2.5', tokenizer_mode='auto', skip_tokenizer_init=False, load_format='auto', trust_remote_code=True,"
           " dtype='auto', kv_cache_dtype='auto', quantization=None, context_length=None, device='cuda', "
           "served_model_name='moonshotai/Kimi-K2.5', chat_template=None, is_embedding=False, revision=None, "
           "host='0.0.0.0', port=30000, mem_fraction_static=0.85, max_running_requests=None, max_total_tokens=None, "
           "chunked_prefill_size=8192, max_prefill_tokens=16384, schedule_policy='fcfs', schedule_conservativeness="
           "1.0, cpu_offload_gb=0, page_size=1, tp_size=8, pp_size=1, stream_interval=1, random_seed=42, "
           "log_level='info', dp_size=1, load_balance_method='round_robin', enable_dp_attention=False, "
           "enable_hierarchical_cache=False, hicache_ratio=2.0, hicache_size=0, cuda_graph_max_bs=None, "
           "disable_cuda_graph=False, enable_metrics=False, decode_log_interval=40)"]
    for r in range(8):
        t = f"[{_ts(30)} TP{r}]"
        out += [f"{t} Init torch distributed ends. mem usage=2.11 GB",
                f"{t} Load weight begin. avail mem={P_GIB:.2f} GB"]
    for r in range(8):
        t = f"[{_ts(340)} TP{r}]"
        out.append(f"{t} Load weight end. elapsed=309.52 s, type=KimiK25ForConditionalGeneration, "
                   f"dtype=torch.bfloat16, avail mem={P_GIB - WEIGHTS_GIB:.2f} GB, mem usage={WEIGHTS_GIB:.2f} GB.")
        if r == 0:
            out.append(f"{t} Using KV cache dtype: torch.bfloat16")
        out += [f"{t} KV Cache is allocated. #tokens: {POOL}, KV size: {POOL * 70272 / 2**30:.2f} GB",
                f"{t} Memory pool end. avail mem=13.06 GB",
                f"{t} Capture cuda graph begin. This can take up to several minutes. avail mem=12.87 GB",
                f"[{_ts(355)} TP{r}] Capture cuda graph end. Time elapsed: 13.81 s. mem usage=3.75 GB. "
                "avail mem=9.12 GB."]
    out += [f"[{_ts(356)} TP0] max_total_num_tokens={POOL}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=2048, context_len=262144, available_gpu_mem=9.12 GB",
            f"[{_ts(360)}] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
            f"[{_ts(362)}] The server is fired up and ready to roll!"]
    sec = 3000
    for i in range(decode_lines):
        sec += 10
        running, queued = rnd.randint(46, 56), rnd.randint(94, 101)
        usage = rnd.uniform(0.85, 0.96)
        gen = rnd.uniform(780, 890)
        t = f"[{_ts(sec)} TP0]"
        if i % 5 == 2:
            out.append(f"{t} Prefill batch{sep} #new-seq: 1, #new-token: {rnd.randint(900, 2400)}, #cached-token: "
                       f"{rnd.randint(0, 300)}, token usage: {usage:.2f}, #running-req: {running - 1}, #queue-req: "
                       f"{queued + 1}")
        out.append(f"{t} Decode batch{sep} #running-req: {running}, #token: {int(usage * POOL)}, token usage: "
                   f"{usage:.2f}, cuda graph: True, gen throughput (token/s): {gen:.2f}, #queue-req: {queued}")
    return out


def write_incident_log(path: Path, **kw) -> Path:
    path.write_text("\n".join(incident_lines(**kw)) + "\n")
    return path
