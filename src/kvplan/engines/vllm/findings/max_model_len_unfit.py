"""max-model-len-unfit (error): one request of max_model_len does not fit the KV cache; vLLM refuses to start
("To serve at least one request with the model's max seq len ...", kv_cache_utils.py::check_enough_kv_cache_memory)."""

from __future__ import annotations

from kvplan.engines.base import FindingContext as Context
from kvplan.result import Finding
from kvplan.units import GiB

ID = "max-model-len-unfit"


def check(ctx: Context) -> list[Finding]:
    p, s = ctx.plan, ctx.plan.settings
    if p.engine != "vllm":
        return []
    avail = (s.get("kv_budget_bytes_per_rank") or 0) - s.get("bytes_per_block", 0)
    need = s.get("one_request_bytes", 0)
    if avail <= 0 or need <= avail:
        return []
    per_token = max(1, need // max(1, s["max_model_len"]))
    fit = avail // per_token // s["block_size"] * s["block_size"]
    msg = (f"per rank: one request of max_model_len {s['max_model_len']:,} needs {need / GiB:.2f} GiB of KV, the cache "
           f"has {avail / GiB:.2f} GiB; vLLM refuses to start")
    return [Finding(ID, "error", msg, f"--max-model-len {fit} (or more KV memory)",
                    {"--max-model-len": str(fit)} if fit > 0 else {})]
