"""Figures vLLM's code does not fix but real logs show, kept as auditable data with their source.

They feed only the terms of the GPU budget that a startup log would otherwise tell (``memory.budget``): the
torch-visible GPU total, non-torch memory, the sampler's bytes per logit and CUDA-graph memory. Each carries a
(low, high) range read from the same sources; the plan's ``BudgetTerm``s carry those ranges so that an error
band can be derived. Sources are public URLs (pinned code at a release tag, or the issue/PR where the log was
posted) with the figure read from them. A startup log's figures (``kvplan explain``, ``--kv-memory-gib``) or
``--kv-cache-memory-bytes`` replace every one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvplan.units import GiB


@dataclass(frozen=True)
class Calibration:
    value: float
    low: float
    high: float
    unit: str  # "GiB" | "B/element"
    what: str
    source: str

    def bytes(self, scale: float = 1.0) -> tuple[int, int, int]:
        """(value, low, high) in bytes, for a GiB figure times ``scale``."""
        assert self.unit == "GiB"
        return int(self.value * scale * GiB), int(self.low * scale * GiB), int(self.high * scale * GiB)


# ---- the GPU total vLLM multiplies by gpu_memory_utilization -------------------------------------------------
# torch.cuda.mem_get_info()[1] is below nvidia-smi's memory.total; vLLM logs it as total_gpu_memory.
TORCH_TOTAL_RESERVE = Calibration(
    0.43, 0.0, 0.86, "GiB",
    "nvidia-smi memory.total - the total vLLM logs: RTX 3090 24576 MiB -> 23.58 GiB (0.42); 80 GB card 79.22 GiB "
    "(H100 81559 MiB: 0.43); 79.15 GiB (A100-80GB 81920 MiB: 0.85); RTX 4060 8188 MiB -> 8.00 GiB (0.00, WSL)",
    "https://github.com/vllm-project/vllm/issues/10517, https://github.com/vllm-project/vllm/pull/10511, "
    "https://github.com/canopyai/Orpheus-TTS/issues/115, https://github.com/vllm-project/vllm/issues/13882")

DRIVER_DRIFT_GIB = 0.10  # the reserve moves ~100-150 MiB between driver branches (H100: 79.11 GiB on 535, 79.19
# on 570, https://github.com/vllm-project/vllm/issues/27508); a GPU seen on one driver only gets this much either way


def catalogued_reserve(gpu_name: str | None) -> Calibration | None:
    """nvidia-smi memory.total − torch's total for this GPU from hardware/gpus.json ``torch_total_mib`` (read from
    PyTorch OOM messages / deviceQuery / vLLM logs on that GPU), with the driver range; None when not catalogued."""
    from kvplan.hardware.gpus import find_gpu

    g = find_gpu(gpu_name)
    r = g.driver_reserve_range_mib if g is not None else None
    if g is None or r is None:
        return None
    v, lo, hi = (x / 1024 for x in r)
    return Calibration(v, max(0.0, min(lo, v - DRIVER_DRIFT_GIB)), max(hi, v + DRIVER_DRIFT_GIB), "GiB",
                       f"nvidia-smi memory.total - torch's total on the {g.name}: {g.total_mib} - "
                       f"{g.torch_total_mib} MiB (hardware/gpus.json torch_total_mib)",
                       g.torch_total_source or "hardware/gpus.json")


@lru_cache(maxsize=256)
def torch_reserve(gpu_name: str | None, platform: str = "cuda") -> Calibration:
    """nvidia-smi memory.total − torch's total for this GPU: the catalog's own figure (``catalogued_reserve``) when it
    has one, else ROCm's 0 (rocm-smi and HIP report the same VRAM total: MI300X, MI250X, MI355X in the catalog) or
    the generic TORCH_TOTAL_RESERVE."""
    own = catalogued_reserve(gpu_name)
    if own is not None:
        return own
    if platform == "rocm":
        return Calibration(0.0, 0.0, TORCH_TOTAL_RESERVE.value, "GiB",
                           "ROCm reports the whole VRAM to torch (MI300X 191.98 GiB = rocm-smi's total)",
                           "hardware/gpus.json (AMD Instinct entries)")
    return TORCH_TOTAL_RESERVE


# ---- the start-up check (v1/worker/utils.py::request_memory): the request must fit what is free at the snapshot --
# https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/utils.py (request_memory) raises "Free memory on
# device ... on startup is less than desired GPU memory utilization"; gpu-util-startup-fail predicts it.
# The GPU total that check's message quotes, as gpu-util-startup-fail takes it: nvidia-smi memory.total minus this
# (the same quantity as TORCH_TOTAL_RESERVE, with the figure the rule has used since it was written).
STARTUP_DRIVER_RESERVE = Calibration(
    0.45, 0.0, 0.86, "GiB",
    "nvidia-smi memory.total - torch's total: 0.42-0.43 GiB on 24-80 GB cards, 0.85 on the A100-80GB, 0.00 under "
    "WSL (the logs of TORCH_TOTAL_RESERVE)", TORCH_TOTAL_RESERVE.source)
# The CUDA context, NCCL communicators and cuBLAS handles exist before the free-memory snapshot (>= 0.11:
# v1/worker/gpu_worker.py::Worker.init_device takes it after init_worker_distributed_environment), so they are not
# free when the request is checked, and not inside the request either.
STARTUP_CONTEXT = Calibration(
    0.6, 0.4, 3.0, "GiB",
    "'~0.4 GB per GPU (context)' before the weights load (RTX 3090, TP8, V1); a few hundred MiB to several GiB per "
    "GPU with TP and NCCL settings (1.79 / 3.58 GiB non-torch on an H100 at TP1 / TP2 when NCCL was counted)",
    "https://github.com/Sandermage/genesis-vllm-patches/issues/24, https://github.com/vllm-project/vllm/pull/10511, "
    "https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_worker.py")

# ---- non-torch memory counted inside the budget, per regime ---------------------------------------------------
# V0 0.6.4 and V1 0.8.x-0.9.0: everything on the device that torch did not allocate, the CUDA context included
NON_TORCH_WHOLE_DEVICE_TP1 = Calibration(
    0.35, 0.25, 0.60, "GiB", "'non_torch_memory=0.35GiB' (RTX 3090, TP1, vLLM 0.6.4: worker.py "
    "determine_num_available_blocks counts cuda used - torch allocated)",
    "https://github.com/vllm-project/vllm/issues/10517")
NON_TORCH_ROCM_TP1 = Calibration(
    2.2, 0.5, 2.6, "GiB", "ROCm before 0.11 (one log each, so calibration data, not a validation): MI300X TP1, "
    "0.6.3: 0.9 x 191.98 - 12.55 weights - 20186 blocks x 8 MiB - activation "
    "0.31 = 2.2 GiB with hipBLASLt; 220 blocks (1.72 GiB) more without it",
    "https://github.com/AUGMXNT/llm-tracker.info-vault/blob/main/MI300X%20Testing.md")
# V0 <= 0.6.3 and 0.6.5-0.10.x, V1 0.9.1-0.10.x: the snapshot is taken before NCCL init, so the NCCL / custom all-reduce
# buffers and cuBLAS workspaces are "non_torch_memory" (vllm/worker/worker.py::Worker.init_device, 0.6.6.post1)
NON_TORCH_SNAPSHOT_TP1 = Calibration(
    0.10, 0.02, 1.80, "GiB", "'non_torch_memory takes 0.10GiB' (80 GB card, TP1, V0 0.8); 0.03 GiB (RTX 4060, "
    "0.7.3); 1.79 GiB (H100 TP1 in the PR that introduced the snapshot)",
    "https://github.com/canopyai/Orpheus-TTS/issues/115, https://github.com/vllm-project/vllm/issues/13882, "
    "https://github.com/vllm-project/vllm/pull/10511")
NON_TORCH_SNAPSHOT_TP_N = Calibration(
    0.25, 0.15, 3.60, "GiB", "TP > 1: 'non_torch_memory takes 0.25GiB' (2 x RTX 4090, 0.7.x); 0.20 GiB "
    "(24 GB cards, 0.8.x); 3.58 GiB (H100 TP2, PR 10511)",
    "https://github.com/vllm-project/vllm/issues/13061, https://github.com/vllm-project/vllm/pull/14447, "
    "https://github.com/vllm-project/vllm/pull/10511")
# NVSwitch boards (SXM/HGX): the NVLS multicast and channel buffers make the TP > 1 communicators larger than on PCIe
# cards. The same libraries cost SGLang 1.25-2.01 GiB per rank on these boards (engines/sglang/baseline_data.py,
# link "nvswitch", four sourced logs); vLLM adds its custom all-reduce and cuBLAS workspaces.
NON_TORCH_SNAPSHOT_NVSWITCH_TP_N = Calibration(
    2.0, 1.2, 3.6, "GiB", "TP > 1 on NVSwitch boards: SGLang's communicators 1.25-2.01 GiB on the same boards; "
    "3.58 GiB (H100 TP2, PR 10511); 0.9 x 79.22 - weights - Available KV cache memory - sampler = ~2.3 GiB on "
    "H100 TP8 (v0.10.0, Qwen3-32B and Qwen3-235B-FP8, two logs of one cluster)",
    "https://github.com/vllm-project/vllm/pull/10511, src/kvplan/engines/sglang/baseline_data.py, "
    "tests/data/preflight cases vllm-eval2025-qwen3-32b-tp8-fp8kv-h100-v0100 / -qwen3-235b-fp8-tp8ep-h100-v0100")
NON_TORCH_ROCM_TP_N = Calibration(
    5.4, 3.0, 6.0, "GiB", "MI300X TP8, 0.6.3 (RCCL, custom all-reduce off): 0.9 x 191.98 - 1.59 weights - "
    "169460 blocks x 1 MiB - activation 0.30 = 5.4 GiB",
    "https://github.com/AUGMXNT/llm-tracker.info-vault/blob/main/MI300X%20Testing.md")
# >= 0.11 V1: the snapshot is taken after NCCL and the cuBLAS handles (v1/worker/gpu_worker.py::Worker.init_device,
# https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_worker.py): what is left grows in the run
NON_TORCH_AFTER_INIT = Calibration(
    0.05, 0.0, 0.30, "GiB", "'0.07 GiB for non-torch memory' (B200 class, V1); the newest accounting folds it "
    "into 'consumed memory (weights + non-torch)'", "https://github.com/vllm-project/vllm/pull/21489")

# ---- the profile run's forward pass --------------------------------------------------------------------------
# Read from the MLP code (model_executor/models/llama.py::LlamaMLP.forward, 0.6.4.post1): residual + MLP input
# [T, H] each, gate_up output [T, 2I/TP], SiLU output [T, I/TP] -> 2H + 3I per token. The logs show one more
# [T, H]: Llama-3.1-8B on an RTX 3090 (0.6.4, no chunked prefill, T = max_model_len): peak_torch_memory 17.06 -
# weights 14.99 = 2.07 GiB at 20000 tokens, and 21.21 - 14.99 - 0.35 - 1478 blocks x 2 MiB = 2.98 GiB at 29000;
# 2H + 3I gives 1.91 / 2.77 GiB, 3H + 3I gives 2.06 / 2.99 GiB. The low end of the band is the code's 2H + 3I.
FORWARD_HIDDEN_ROWS = 3
FORWARD_HIGH_FACTOR = 1.10  # attention workspaces and allocator rounding on top (no log above +1 %)
FORWARD_SOURCE = "https://github.com/vllm-project/vllm/issues/10517"

# ---- the profile run's sampler: bytes per element of the [requests, vocab] logits ----------------------------
# V0 (worker/model_runner.py::profile_run, top_k = vocab - 1, top_p = 0.99) and V1 on the PyTorch top-k/top-p path
# (v1/sample/ops/topk_topp_sampler.py::apply_top_k_top_p): bf16 logits, an fp32 copy, sort values + int64 indices,
# masks, softmax/cumsum, the inverse scatter and the probabilities live at once (about 34-40 B read from the code).
SAMPLER_NATIVE = Calibration(
    39.0, 36.0, 41.0, "B/element",
    "V0 max_num_seqs sweep: +0.61 GiB from 128 to 256 sequences (vocab 128256) = 39.9 B/element; PR 10511 "
    "Llama-3-8B (8192 tokens, 256 seqs): 'PyTorch activation peak memory 1.26GiB' = 39.2 B/element",
    "https://github.com/vllm-project/vllm/pull/9003, https://github.com/vllm-project/vllm/pull/10511")
# V1 0.8 - 0.13: FlashInfer's sampler when the package is importable (optional extra; docker images ship it), else
# the PyTorch path (v1/sample/ops/topk_topp_sampler.py::TopKTopPSampler.__init__): the PyTorch figure, with a range
# down to the fused path's
SAMPLER_V1_EITHER = Calibration(
    39.0, 6.0, 41.0, "B/element",
    "pip installs without flashinfer run the PyTorch path (V0 figures above); with flashinfer the fused path "
    "(below)", "https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/v1/sample/ops/topk_topp_sampler.py, "
    "https://github.com/vllm-project/vllm/pull/9003")
# V1 >= 0.14: FlashInfer is a hard dependency (top_k_top_p_sampling_from_logits), 0.33 adds a Triton top-k/top-p
# (https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/sample/ops/topk_topp_sampler.py): far fewer buffers.
SAMPLER_FUSED = Calibration(
    6.0, 2.0, 20.0, "B/element",
    "Qwen3-4B-class AWQ, 48 GB SM89, main (2026): peak activation 0.57 GiB incl. the 0.42 GiB graph estimate -> "
    "0.15 GiB transient for 2048 tokens / 256 requests x 151936 logits (<= 4 B/element); FlashInfer path read "
    "from the code: 10-20 B/element", "https://github.com/vllm-project/vllm/pull/57047")

# V1 0.14 - 0.32 as the logs show it: the sampler the dummy run takes depends on the version's default (0.14-0.20
# PyTorch-native unless VLLM_USE_FLASHINFER_SAMPLER=1; 0.21+ FlashInfer when the compute capability is supported:
# https://github.com/vllm-project/vllm/blob/v0.18.0/vllm/v1/sample/ops/topk_topp_sampler.py,
# https://github.com/vllm-project/vllm/blob/v0.27.0/vllm/v1/sample/ops/topk_topp_sampler.py
# (flashinfer_sampler_supported))
# but the peaks real launches log sit between the fused and the native figures on both sides of that switch, so the
# value is the logs' middle and the range spans both paths.
SAMPLER_V1_LOGGED = Calibration(
    25.0, 6.0, 41.0, "B/element",
    "0.31.0 A100-80GB Llama-3.1-8B (256 x 128256): peak activation 1.44 GiB - 0.23 GiB graphs = ~40 B/element; "
    "0.19.1 A100-40GB Qwen3-8B (256 x 151936): ~25 B/element from the logged KV memory; 0.17.1 H100 Llama-3.1-8B "
    "(1024 x 128256): <= 16 B/element (the 16384-token forward is the larger part); fused path read from the code "
    "6 B/element", "tests/data/preflight cases vllm-dg05-llama31-8b-a100-v0310, "
    "vllm-tokenkaki-qwen3-8b-a100-40gb-v0191, vllm-gatech-llama31-8b-h100-gmu095-v0171 (sources in cases.jsonl); "
    "https://github.com/vllm-project/vllm/pull/57047")

# ---- CUDA-graph memory, when the version subtracts its estimate (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1) ---
CUDAGRAPH_ESTIMATE = Calibration(
    0.40, 0.15, 2.50, "GiB",
    "'Estimated CUDA graph memory: 0.36 GiB total' (gpustack); 0.17 GiB (club-3090 #127); 0.42 GiB estimated / "
    "0.22 actual (PR 57047); 2.43 GiB estimated (GLM MoE on DGX Spark)",
    "https://github.com/gpustack/runner/pull/251, https://github.com/noonghunna/club-3090/issues/127, "
    "https://github.com/vllm-project/vllm/pull/57047, "
    "https://github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks/pull/25")

# ---- terms kvplan does not model yet (a band only) -------------------------------------------------------------
ENCODER_PROFILE = Calibration(
    1.0, 0.0, 3.5, "GiB", "multimodal encoder activations and outputs of the dummy run on one maximum-size item "
    "(v1/worker/gpu_model_runner.py::profile_run); not modeled from the encoder's shapes: the one log read shows "
    "2.7 GiB (Qwen3-VL-30B-A3B TP2 H100, 0.12.0, video items, encoder cache budget 153,600 tokens: 38.15 GiB "
    "available against 41.68 for the text-only Qwen3-30B-A3B launch of the same repository, 0.85 GiB of it weights); "
    "image-only models need less",
    "https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu_model_runner.py, "
    "https://github.com/Zzsf11/VideoCuttingAgent/blob/66d77264aab22be6666e15e51e7a256260ff5a0e/output/"
    "Qwen3VL_vllm-server.out")

ALL: tuple[Calibration, ...] = (
    TORCH_TOTAL_RESERVE, STARTUP_DRIVER_RESERVE, STARTUP_CONTEXT, NON_TORCH_WHOLE_DEVICE_TP1, NON_TORCH_ROCM_TP1,
    NON_TORCH_SNAPSHOT_TP1, NON_TORCH_SNAPSHOT_TP_N, NON_TORCH_SNAPSHOT_NVSWITCH_TP_N,
    NON_TORCH_ROCM_TP_N, NON_TORCH_AFTER_INIT, SAMPLER_NATIVE,
    SAMPLER_V1_EITHER, SAMPLER_FUSED, SAMPLER_V1_LOGGED, CUDAGRAPH_ESTIMATE, ENCODER_PROFILE)
