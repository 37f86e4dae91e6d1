"""What SGLang's default resolution takes and gives (defaults.py for 0.4.4+, defaults_old.py for 0.3.0 ..
0.4.3.post4)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DefaultsInput:
    version: str  # SGLang version, e.g. "0.5.9"
    gpu_mem_mib: int | None  # nvidia-smi memory.total, min over visible GPUs; None = SGLang's "unknown" path
    tp: int = 1
    pp: int = 1
    dp: int = 1  # --dp-size
    enable_dp_attention: bool = False
    is_mla: bool = False
    is_multimodal: bool = False  # HF config has vision_config
    vit_layers: int | None = None  # None -> SGLang's getattr default 24
    vit_hidden: int | None = None  # None -> SGLang's getattr default 1024
    speculative_algorithm: str | None = None
    chunked_prefill_size: int | None = None  # user-given or None
    cuda_graph_max_bs: int | None = None  # user-given or None
    max_running_requests: int | None = None
    disable_cuda_graph: bool = False
    context_len: int | None = None  # only read as --context-length by the 0.5.13-0.5.16 prefill-graph clamp


@dataclass(frozen=True)
class ResolvedDefaults:
    mem_fraction_static: float
    chunked_prefill_size: int  # after the DP-attention division (the reserve used the undivided value)
    cuda_graph_max_bs: int  # decode graph max batch size (<=0.5.2: largest default capture size)
    reserved_mib: float | None  # the reserve the formula used, when the version has one
    rule: str  # short id of the rule and the source function
