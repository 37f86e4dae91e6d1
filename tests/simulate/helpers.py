"""Small builders for scheduler tests: instances without a Plan, a constant step time, hand-made requests."""

from __future__ import annotations

from kvplan.simulate.core.cache import PrefixCache
from kvplan.simulate.core.request import Req
from kvplan.simulate.core.sink import Sink
from kvplan.simulate.policy.sglang import SGLangInstance
from kvplan.simulate.policy.sglang_knobs import SGLangKnobs
from kvplan.simulate.policy.vllm import VLLMInstance
from kvplan.simulate.policy.vllm_knobs import VLLMKnobs
from kvplan.simulate.steptime.model import StepModel
from kvplan.simulate.steptime.roofline import Roofline

ROOF = Roofline(weights_bytes=10**9, expert_fraction=0.0, n_experts=0, experts_per_token=0, kv_bytes_per_token=1000,
                active_params_per_token=1e9, mem_bw_gbps=1000.0, dense_tflops=1000.0, hardware_source="test")


def const_model(step_s: float = 0.01) -> StepModel:
    """Every forward takes ``step_s`` seconds, whatever it computes."""
    return StepModel(ROOF, (step_s, 0.0, 0.0, 0.0, 0.0, 0.0), "constant (test)")


def sglang(cap: int, page: int = 1, chunk: int | None = 8192, max_running: int = 1024, version: str = "0.5.9",
           host_tokens: int = 0, step_s: float = 0.01, **kw) -> SGLangInstance:
    k = SGLangKnobs(version=version, page_size=page, chunked_prefill_size=chunk, max_prefill_tokens=16384,
                    max_running_requests=max_running, **kw)
    cache = PrefixCache(page=page, whole_leaf=True, host_tokens=host_tokens, write_policy=k.hicache_write_policy)
    inst = SGLangInstance(0, cap, page, const_model(step_s), cache, Sink(), max_running, 63e9, 1000)
    inst.setup(k)
    return inst


def vllm(cap: int, block: int = 16, max_num_seqs: int = 256, budget: int = 2048, version: str = "0.32.0",
         step_s: float = 0.01, prefix_caching: bool = True) -> VLLMInstance:
    k = VLLMKnobs(version=version, block_size=block, max_num_seqs=max_num_seqs, max_num_batched_tokens=budget,
                  prefix_caching=prefix_caching)
    cache = PrefixCache(page=block, whole_leaf=False, enabled=prefix_caching)
    inst = VLLMInstance(0, cap, block, const_model(step_s), cache, Sink(), max_num_seqs)
    inst.setup(k)
    return inst


def req(rid: int, prompt: int, output: int, max_new: int | None = None, **kw) -> Req:
    return Req(rid, 0.0, prompt, output, max_new, **kw)
