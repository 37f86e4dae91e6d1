"""max-model-len-unfit (error): one request of max_model_len does not fit the KV cache; vLLM refuses to start
("To serve at least one request with the model's max seq len ...", kv_cache_utils.py::check_enough_kv_cache_memory)."""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.vllm.settings import vllm_settings
from kvplan.result import Finding
from kvplan.units import GiB

ID = "max-model-len-unfit"


def check(ctx: FindingContext) -> list[Finding]:
    s = vllm_settings(ctx.plan)
    avail = s.kv_budget_bytes_per_rank - s.bytes_per_block
    need = s.one_request_bytes
    if avail <= 0 or need <= avail:
        return []
    per_token = max(1, need // max(1, s.max_model_len))
    fit = avail // per_token // s.block_size * s.block_size
    msg = (f"per rank: one request of max_model_len {s.max_model_len:,} needs {need / GiB:.2f} GiB of KV, the cache "
           f"has {avail / GiB:.2f} GiB; vLLM refuses to start")
    return [Finding(ID, "error", msg, f"--max-model-len {fit} (or more KV memory)",
                    {"--max-model-len": str(fit)} if fit > 0 else {})]
