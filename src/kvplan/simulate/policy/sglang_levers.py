"""The SGLang launch levers ``kvplan tune`` tries (the same ones ``kvplan check`` and ``diagnose`` know).

static fraction (+0.03 per step), fp8 KV, DP attention (MLA under plain TP), HiCache (the largest host pool the node
takes, else ratio 2), max running requests (around the simulated running batch), chunked prefill size (½×, 2×),
CUDA-graph batch sizes (cover the running batch only; SGLang sizes the pool before capturing, so this frees memory
that makes a higher fraction safe, which ``check`` decides), two replicas (``--dp-size``).
"""

from __future__ import annotations

from typing import Any

from kvplan.simulate.policy.lever import Lever, round_up

MFS_STEP, MFS_MAX, MAX_STEPS = 0.03, 0.98, 5


def levers(inputs: Any, hint: dict | None = None) -> list[Lever]:
    from kvplan.engines.sglang.settings import sglang_settings

    hint = hint or {}
    s = sglang_settings(inputs.plan)
    out: list[Lever] = []
    mfs = float(s.mem_fraction_static)
    for k in range(1, MAX_STEPS + 1):
        x = round(mfs + MFS_STEP * k, 2)
        if x > MFS_MAX:
            break
        out.append(Lever(f"fraction {x:.2f}", {"--mem-fraction-static": f"{x:.2f}"}, "fraction"))
    if "fp8" not in s.kv_cache_dtype:
        out.append(Lever("fp8 KV", {"--kv-cache-dtype": "fp8_e4m3"}, "fp8",
                         "half the bytes per token; fp8 KV can change outputs: check quality first"))
    tp = s.tp_size
    if inputs.plan.model.is_mla and tp > 1 and not s.enable_dp_attention:
        out.append(Lever("DP attention", {"--enable-dp-attention": "", "--dp-size": str(tp)}, "dp-attention",
                         f"{tp} KV pools instead of one replicated MLA pool; attention weights replicated"))
    if not s.hicache.enabled:
        size = s.host_fix.flags.get("--hicache-size") if s.host_fix else None
        flags: dict[str, str | None] = {"--enable-hierarchical-cache": ""}
        flags.update({"--hicache-size": size} if size else {"--hicache-ratio": "2"})
        out.append(Lever("HiCache", flags, "hicache", "extends the prefix cache to host memory; adds no running "
                         "requests"))
    running = hint.get("running_mean")
    cur_mrr = inputs.max_running_requests * inputs.dp_groups
    if running:
        for f in (0.75, 1.25):
            n = round_up(running * f, 8)
            if n < cur_mrr:
                out.append(Lever(f"max running {n}", {"--max-running-requests": str(n)}, "max-running",
                                 "caps admission below what retraction would otherwise undo"))
    chunk = s.chunked_prefill_size
    if chunk and int(chunk) > 0:
        for c in (int(chunk) // 2, int(chunk) * 2):
            if c >= 512:
                out.append(Lever(f"chunked prefill {c}", {"--chunked-prefill-size": str(c)}, "chunk"))
    bs = s.cuda_graph_max_bs
    peak = hint.get("running_max") or running
    if bs and peak:
        b = round_up(float(peak) * 1.25 / max(1, inputs.dp_groups), 8)
        if b < int(bs):
            out.append(Lever(f"graphs bs≤{b}", {"--cuda-graph-max-bs": str(b)}, "graphs",
                             "smaller CUDA-graph pool: memory for a higher fraction (check decides)"))
    if not s.enable_dp_attention:
        dp = s.dp_size or 1
        out.append(Lever("2 replicas", {"--dp-size": str(dp * 2)}, "replicas",
                         f"a second copy on {s.world_size} more GPUs (SGLang's router spreads requests)",
                         combinable=False))
    return out
