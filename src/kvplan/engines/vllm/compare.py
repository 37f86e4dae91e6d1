"""vLLM's figures for ``kvplan explain``: blocks, "KV cache size" tokens, maximum concurrency, weights and the KV memory
the log printed vs the plan, with the tolerance a budget printed as X.XX GiB leaves in blocks."""

from __future__ import annotations

from kvplan.engines.results import Comparison
from kvplan.engines.vllm.settings import vllm_settings
from kvplan.logs.facts import LogFacts
from kvplan.result import Plan
from kvplan.units import GiB

HALF_CENT = 0.005  # a figure printed as X.XX GiB is known to ± 0.005 GiB


def compare(facts: LogFacts, plan: Plan) -> list[Comparison]:
    r, rep, s, out = plan.per_rank, plan.per_replica, vllm_settings(plan), []
    bpb = s.bytes_per_block or 1
    avail = s.kv_budget_bytes_per_rank / GiB
    slack_blocks = HALF_CENT * GiB / bpb + 1  # a budget printed as X.XX GiB
    if facts.gpu_blocks is not None:
        out.append(Comparison("kv_blocks", "per rank", facts.gpu_blocks, r.kv_blocks,
                              slack_blocks / max(facts.gpu_blocks, 1), "minimum across workers, null block included"))
    if facts.kv_tokens is not None:
        c = Comparison("kv_tokens", "per replica", facts.kv_tokens, rep.kv_tokens,
                       slack_blocks * s.block_size / max(facts.kv_tokens, 1))
        if c.ok is False:
            c.note = ("likely cause: block size or KV dtype chosen by the attention backend, max_model_len, or a "
                      "different capacity formula for this version")
        out.append(c)
    if facts.max_concurrency is not None:
        tol = max(0.006 / facts.max_concurrency if facts.max_concurrency > 0 else 1.0,
                  slack_blocks / max(r.kv_blocks or 1, 1))
        out.append(Comparison("max_concurrency", "per replica", facts.max_concurrency,
                              round(rep.max_concurrency or 0, 4), tol))
    fr = facts.first_rank()
    if fr is not None and fr.weights_gib is not None:
        ckpt = s.checkpoint_weights_bytes_per_rank or r.weights_bytes
        out.append(Comparison("weights_gib", "per rank", fr.weights_gib, round(ckpt / GiB, 3), 0.03,
                              "log vs kvplan's checkpoint-based estimate"))
    if fr is not None and fr.available_kv_gib is not None and not s.kv_budget_exact:
        out.append(Comparison("available_kv_gib", "per rank", fr.available_kv_gib, round(avail, 3), 0.05))
    return out
