"""What SGLang's "Load weight end ... mem usage" holds beyond the tensors kvplan counts and the caching allocator's
segment tails (``models.torch_allocator``), from real logs.

"mem usage" is a free-memory drop (``torch.cuda.mem_get_info`` around ``ModelRunner.load_model``), so device
memory the process gains while loading without a tensor behind it shows in it. Residual = logged mem usage -
(tensors + RoPE cache + simulated allocator packing):

- CUDA, TP1: a per-process ~0.09 GiB that some releases take before "Load weight begin" (then it is in the baseline
  T: main from 2026-01-20 prints it as "Init torch distributed ends. mem usage=0.09 GB") and others during loading.
  The SGLang docs CI ran the same models on the same runners for a year: W alternates between two modes 0.08-0.09
  apart (Llama-3.1-8B 15.11 / 15.02, Qwen2.5-0.5B 1.06 / 0.98) while the free memory after loading is the same in
  both. The high mode: up to 0.4.6.post3 and 0.4.9.post6 to the 0.5.7 era; the low mode: 0.4.6.post4-0.4.9.post5
  and from 0.5.8.
- CUDA, TP > 1: dense models show nothing beyond the packing (Qwen3-14B TP4 on 4x RTX 4090, main 2026-06: +0.004);
  MoE models keep ~0.14 (Qwen3-Next-80B TP4, 2025-09: +0.146; Qwen3-235B-A22B TP8 PP4 H200, ~0.4.9: +0.143).
- ROCm: +0.02-0.03 after packing (Qwen3-0.6B TP1 / TP2 on MI355X, 0.5.17).
"""

from __future__ import annotations

from kvplan.engines.sglang.calibration import Calibration
from kvplan.engines.versions import Version

DOCS_CI = ("SGLang docs CI runs 2025-03..2026-04 (github.com/Stars1233/sgl-project.github.io, a mirror of the built "
           "docs.sglang.ai) and https://github.com/sgl-project/sglang/pull/4760")
CUDA_TP1_LOADING = Calibration(
    0.09, "the CUDA process's ~0.09 GiB taken during loading in this release (docs CI: Llama-3.1-8B TP1 15.11 vs "
    "15.02 GB, Qwen2.5-0.5B 1.06 vs 0.98 GB between releases, the same free memory after loading)", DOCS_CI)
CUDA_TP1_BEFORE = Calibration(
    0.0, "the CUDA process's ~0.09 GiB is taken before 'Load weight begin' in this release (in the baseline T)",
    DOCS_CI)
CUDA_TP_DENSE = Calibration(
    0.0, "dense TP > 1: nothing beyond the allocator packing (Qwen3-14B TP4 4x RTX 4090, main 2026-06: 7.08 GB "
    "logged = tensors + packing + 0.004)", "find_string index id 55529353766 (public GitHub file)")
CUDA_TP_MOE = Calibration(
    0.14, "MoE TP > 1: ~0.14 GiB beyond the packing (Qwen3-Next-80B-A3B TP4, 2025-09: +0.146; Qwen3-235B-A22B "
    "TP8 PP4 H200 ~0.4.9, TP0 PP0 13.73 GB: +0.143)",
    "https://github.com/sgl-project/sglang/issues/10618, https://github.com/sgl-project/sglang/issues/8337")
ROCM = Calibration(
    0.03, "ROCm: Qwen3-0.6B TP1 / TP2 MI355X, sglang 0.5.17: +0.03 / +0.02 GiB beyond the packing",
    "find_string index id 65830671609 (public GitHub file)")
NONE = Calibration(0.0, "CPU: no device context", "-")


def _loads_context_during_weights(version: str) -> bool:
    v = Version(version)
    return v < Version("0.4.6.post4") or Version("0.4.9.post6") <= v < Version("0.5.8")


def load_context_growth(platform: str, tp: int = 1, version: str = "0.5.9", moe: bool = False) -> Calibration:
    if platform == "rocm":
        return ROCM
    if platform != "cuda":
        return NONE
    if tp > 1:
        return CUDA_TP_MOE if moe else CUDA_TP_DENSE
    return CUDA_TP1_LOADING if _loads_context_during_weights(version) else CUDA_TP1_BEFORE
