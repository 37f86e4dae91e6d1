"""What SGLang's "Load weight end ... mem usage" holds beyond the tensors kvplan counts, from real logs.

"mem usage" is a free-memory drop (``torch.cuda.mem_get_info`` around ``ModelRunner.load_model``), so device
memory the process gains while loading without a tensor behind it (kernel modules loaded on first use by the
weight loaders and post-processing) shows in it. The code does not fix it; the residual is
logged mem usage - (tensors + RoPE cache + allocator segment rounding), per platform.
"""

from __future__ import annotations

from kvplan.engines.sglang.calibration import Calibration

CUDA_TP1 = Calibration(
    0.09, "Llama-3.1-8B TP1 H100, sglang ~0.4.4: mem usage 15.11 GB - 14.96 GiB tensors - 0.06 GiB fp32 RoPE cache",
    "https://github.com/sgl-project/sglang/pull/4760 (../shared/logcorpus sglang-pr4760-llama31-8b-fa3)")
CUDA_TP = Calibration(
    0.20, "Qwen3-235B-A22B bf16 TP8 PP4 H200, sglang ~0.4.9, TP0 PP0: mem usage 13.73 GB - 13.53 GiB "
    "(23 layers + embedding + RoPE + segments); one log, TP > 1 on CUDA",
    "https://github.com/sgl-project/sglang/issues/8337 (../shared/logcorpus sglang-8337-qwen3-235b-pp4tp8-fp8-online)")
ROCM = Calibration(
    0.05, "Qwen3-30B-A3B TP1 MI355X (56.98 GB - 56.93 GiB, +0.05) and DeepSeek-R1 TP8 MI308X sglang 0.4.6 "
    "(81.66 GB - 81.61 GiB, +0.05)",
    "https://github.com/sgl-project/sglang/pull/18263, https://github.com/sgl-project/sglang/issues/6001")
NONE = Calibration(0.0, "CPU: no device context", "-")


def load_context_growth(platform: str, tp: int = 1) -> Calibration:
    if platform == "cuda":
        return CUDA_TP1 if tp == 1 else CUDA_TP
    return ROCM if platform == "rocm" else NONE
