"""Whether a V1 launch runs vLLM's Model Runner V2 (``vllm/v1/worker/gpu/model_runner.py``), and what that changes.

The V2 runner's ``profile_cudagraph_memory`` returns 0 from 0.21.0 through 0.28.x ("It is TBD whether we keep
this API or not"), so ``gpu_worker.py::determine_available_memory`` subtracts no CUDA-graph estimate for it:
the graphs are captured after the KV cache, outside the budget, though VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
defaults to 1. 0.29.0 implements it (``_profile_cudagraph_memory``). Read in the released wheels, e.g.
https://github.com/vllm-project/vllm/blob/v0.27.1/vllm/v1/worker/gpu/model_runner.py and
https://github.com/vllm-project/vllm/blob/v0.29.0/vllm/v1/worker/gpu/model_runner.py.

The default (``config/vllm.py::VllmConfig.use_v2_model_runner`` and ``_is_default_v2_model_runner_model``;
``VLLM_USE_V2_MODEL_RUNNER`` overrides it): a "generate" model whose architecture is in
``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` - 0.22: Qwen3 dense, not quantized; 0.23: Llama, Mistral, Qwen3 dense,
not quantized; 0.24: Llama, Mistral, Qwen3, DeepSeek-V2, Qwen2-MoE, Granite-MoE - or, from 0.25, any model that
is neither MoE nor hybrid (plus those MoE lists), unless a feature V2 lacks is on (kvplan reads one: a speculative
method other than EAGLE/EAGLE3/MTP/DFlash/DSpark). 0.21 uses it only on the variable. Read in the
0.21.0-0.29.0 wheels (https://github.com/vllm-project/vllm/blob/v0.26.0/vllm/config/vllm.py).
"""

from __future__ import annotations

from kvplan.engines.versions import Version
from kvplan.engines.vllm.args import VLLMArgs
from kvplan.models.spec import ModelSpec

_DENSE_DEFAULT = {  # version -> architectures that default to V2 when not MoE and not quantized
    "0.22": frozenset({"Qwen3ForCausalLM"}),
    "0.23": frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}),
}
_LIST_0_24 = frozenset({"Qwen3ForCausalLM", "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM",
                        "GraniteMoeForCausalLM", "LlamaForCausalLM", "MistralForCausalLM"})
_MOE_DEFAULT = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
_V2_SPEC_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")


def _env_choice(args: VLLMArgs) -> bool | None:
    raw = args.env.get("VLLM_USE_V2_MODEL_RUNNER")
    if raw is None:
        return None
    return raw.strip().lower() in ("1", "true")


def _unsupported(args: VLLMArgs) -> bool:
    """A speculative method the V2 runner does not take (read through speculative.py, as the features are)."""
    if not args.speculative_config:
        return False
    from kvplan.engines.vllm.speculative import method_of, parse_config

    return method_of(parse_config(args.speculative_config)) not in _V2_SPEC_METHODS


def uses_model_runner_v2(version: str, model: ModelSpec, args: VLLMArgs) -> bool:
    v = Version(version)
    if v < Version("0.21.0"):
        return False
    env = _env_choice(args)
    if env is not None:
        return env
    if v < Version("0.22.0"):
        return False
    arch, is_moe, quantized = model.architecture, model.moe is not None, model.quant_method is not None
    key = "{}.{}".format(*v.release[:2])
    if key in _DENSE_DEFAULT:
        default = arch in _DENSE_DEFAULT[key] and not is_moe and not quantized
    elif v < Version("0.25.0"):
        default = arch in _LIST_0_24
    else:
        default = model.linear is None and (arch in _MOE_DEFAULT or not is_moe)
    return default and not _unsupported(args)


def skips_cudagraph_estimate(version: str, model: ModelSpec, args: VLLMArgs) -> bool:
    """True when the V2 runner runs and its ``profile_cudagraph_memory`` is the 0.21-0.28 stub returning 0."""
    return Version(version) < Version("0.29.0") and uses_model_runner_v2(version, model, args)
