"""The vLLM scheduler levers only ``kvplan tune`` tries (the launch levers ``check`` and ``diagnose`` know come from
the engine: simulate/engine_levers.py): ``--max-num-seqs`` around the simulated running batch (¾×, 1½×) and
``--max-num-batched-tokens`` (½×, 2×)."""

from __future__ import annotations

from typing import Any

from kvplan.simulate.policy.lever import Lever, round_up


def levers(inputs: Any, hint: dict | None = None) -> list[Lever]:
    from kvplan.engines.vllm.settings import vllm_settings

    hint = hint or {}
    s = vllm_settings(inputs.plan)
    out: list[Lever] = []
    seqs = int(s.max_num_seqs or inputs.max_running_requests)
    running = hint.get("running_mean")
    if running:
        for f in (0.75, 1.5):
            n = round_up(running * f, 4)
            if n != seqs:
                out.append(Lever(f"max-num-seqs {n}", {"--max-num-seqs": str(n)}, "max-running"))
    mnbt = int(s.max_num_batched_tokens or 0)
    for c in (mnbt // 2, mnbt * 2):
        if c >= max(256, seqs):
            out.append(Lever(f"max-num-batched-tokens {c}", {"--max-num-batched-tokens": str(c)}, "chunk"))
    return out
