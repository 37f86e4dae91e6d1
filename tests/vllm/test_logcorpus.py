"""vLLM cases of ../shared/logcorpus that carry enough facts (model, the KV memory the log printed, its block or
token count), reproduced from the corpus files.

A log prints its KV memory rounded to 0.01 GiB, so the block count it implies is known to ± 0.005 GiB / bytes
per block; the bound below is that rounding plus one block (for these cases: within 1-3 blocks).

Left out, with the reason: vllm-13061 (the logged count is the minimum over TP ranks, but the log shows only one
rank's KV memory), vllm-pr20665 (the figures fit TP2 x PP2, not the recorded PP4, and the log predates the
PPMissingLayer fix it was posted for), vllm-28228 (Kimi-Linear: hybrid linear attention, not modeled for vLLM),
the rest print no KV memory or no block/token count.
"""

from __future__ import annotations

import json
import math

import pytest

from kvplan import check
from tests.conftest import CORPUS

GiB = 2**30


def _case(case_id: str) -> dict:
    path = CORPUS / "cases.jsonl"
    assert path.is_file(), f"logcorpus not found at {CORPUS} (CI has ../shared beside the clone)"
    for line in path.read_text().splitlines():
        c = json.loads(line)
        if c["id"] == case_id:
            assert (CORPUS / c["raw_file"]).is_file()
            return c
    raise AssertionError(f"case {case_id} not in the corpus")


def _bound(avail_gib: float, bytes_per_block: int) -> int:
    return math.ceil(0.005 * GiB / bytes_per_block) + 1


# (case id, model as kvplan should read it, flags, engine version, gpu, the observed GiB key)
CASES = [
    # Kimi-K2-Thinking TP8: same attention as Kimi-K2-Instruct (61 layers, MLA 512+64); FlashMLA block 64;
    # "Available KV cache memory: 46.80 GiB" -> "GPU KV cache size: 715,072 tokens"
    ("vllm-recipes115-kimi-k2-thinking-tp8", "moonshotai/Kimi-K2-Instruct", ["--tensor-parallel-size", "8"],
     "0.11.0", "h200", "available_kv_cache_gib"),
    # Llama-3.1-8B on a 3090 (V0): "# GPU blocks: 1952" from 3.81 GiB of KV, max_model_len 20000, concurrency 1.56x
    ("vllm-10517-llama31-8b-3090-20k", "meta-llama/Llama-3.1-8B-Instruct", ["--max-model-len", "20000"],
     "0.6.4", "rtx-4090", "kv_cache_size_gib"),
]


@pytest.mark.parametrize("case_id, model, flags, version, gpu, key", CASES, ids=[c[0] for c in CASES])
def test_corpus_case(case_id, model, flags, version, gpu, key):
    c = _case(case_id)
    avail = c["observed"][key]
    r = check(["vllm", "serve", model, *flags], kv_memory_gib=avail, engine_version=version, gpu=gpu,
              host_mem_gib=512)
    bpb = r.plan.settings.bytes_per_block
    block = r.plan.settings.block_size
    obs = c["observed"]
    observed_blocks = obs.get("gpu_blocks") or obs["gpu_kv_cache_tokens"] // block
    assert abs(r.plan.per_rank.kv_blocks - observed_blocks) <= _bound(avail, bpb), (r.plan.per_rank.kv_blocks,
                                                                                   observed_blocks)
    if "gpu_kv_cache_tokens" in obs:
        assert abs(r.plan.per_replica.kv_tokens - obs["gpu_kv_cache_tokens"]) <= _bound(avail, bpb) * block
    if "max_concurrency" in obs:
        assert abs(r.plan.per_replica.max_concurrency - obs["max_concurrency"]) < 0.01 + _bound(avail, bpb) / (
            r.plan.settings.blocks_per_request)
