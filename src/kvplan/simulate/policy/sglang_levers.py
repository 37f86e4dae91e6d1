"""The SGLang scheduler levers only ``kvplan tune`` tries (the launch levers ``check`` and ``diagnose`` know come from
the engine: simulate/engine_levers.py): max running requests around the simulated running batch (¾×, 1¼×) and the
chunked prefill size (½×, 2×)."""

from __future__ import annotations

from typing import Any

from kvplan.simulate.policy.lever import Lever, round_up


def levers(inputs: Any, hint: dict | None = None) -> list[Lever]:
    from kvplan.engines.sglang.settings import sglang_settings

    hint = hint or {}
    s = sglang_settings(inputs.plan)
    out: list[Lever] = []
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
    return out
