"""The profile run vLLM does before sizing the KV cache: its batch, and the activation peak it leaves.

Batch (T tokens, R sequences) when the command does not set them:

- V0 (the default engine before 0.8.0, ``VLLM_USE_V1=0`` up to 0.10.x): ``config.py::SchedulerConfig.__init__``
  T = ``max(max_model_len, 2048)`` without chunked prefill; with it 512 (0.6.4) / 2048 (0.6.6+); multimodal
  ``max(T, 5120)``. ``engine/arg_utils.py::EngineArgs.create_engine_config`` turns chunked prefill on only when
  max_model_len > 32768 on CUDA (not ROCm from 0.6.6, not MLA from 0.7.3), without sliding window or multimodal.
  R = ``max_num_seqs`` = 256 (``worker/model_runner.py::profile_run`` splits T over R sequences).
  (https://github.com/vllm-project/vllm/blob/v0.6.4.post1/vllm/config.py, .../v0.7.3/vllm/engine/arg_utils.py)
- V1 (``engine/arg_utils.py::_set_default_args_v1``, 0.14+ ``get_batch_defaults``, ``vllm serve``): device total
  >= 70 GiB (and, from 0.9.0, no "a100" in the name): T = 8192, R = 1024; else T = 2048, R = 256; from 0.32
  (read in the installed 0.32.0 and the 0.33.0 wheel; absent in 0.27.0) >= 160 GiB: T = 16384, R = 1024.
  vLLM-CPU: T = 2048 x world, R = 128 x world. T = min(R x max_model_len, T).
  The dummy run samples ``min(T, R)`` rows (``v1/worker/gpu_model_runner.py::_dummy_run``).

Activation peak (per rank, weights excluded; ``memory_profiling`` torch peak increase):
``A = max(F, S)`` with the decoder MLP peak ``F = T x d x (3H + 3 I/TP)``: residual + MLP input + gate_up output
(2I/TP) + SiLU output (I/TP) read from the model code, plus one more [T, H] buffer the logs show
(``calibration.FORWARD_HIDDEN_ROWS``); MoE: ``T x k x (max(2 mI/TP, H) + mI/TP) x d + T x E x 4`` for the
fused-MoE caches and router logits on top of the hidden rows; and the sampler ``S = R x V x s + T x H x d``
(``s`` = bytes per logit, ``calibration.SAMPLER_*``). V0 gathers logits to the driver only
(``LogitsProcessor._gather_logits``): other ranks hold ``R x V/TP x d``;
the engine takes the minimum blocks over ranks, i.e. the driver's.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.versions import Version
from kvplan.engines.vllm import calibration as cal
from kvplan.models.spec import ModelSpec
from kvplan.units import GiB


def engine_kind(version: str, env: dict[str, str], fallback: str | None = None) -> str:
    """"v0" | "v1": the engine a launch uses (envs.py VLLM_USE_V1 default "1" from 0.8.0; V0 gone in 0.11).

    ``fallback``: the feature for which 0.8-0.10's V1 oracle falls back to V0 (``v1_oracle.v0_fallback``); an
    explicit VLLM_USE_V1=1 makes that an error in vLLM, not a fallback, so V1 is kept."""
    v = Version(version)
    if v < Version("0.8.0"):
        return "v1" if env.get("VLLM_USE_V1") == "1" else "v0"
    if v < Version("0.11.0") and env.get("VLLM_USE_V1") == "0":
        return "v0"
    if v < Version("0.11.0") and fallback and env.get("VLLM_USE_V1") != "1":
        return "v0"
    return "v1"


@dataclass(frozen=True)
class Batch:
    tokens: int  # T: max_num_batched_tokens
    seqs: int  # max_num_seqs (the scheduler's cap)
    sampled_rows: int  # R: rows of logits the dummy run samples
    chunked_prefill: bool
    source: str


def batch_defaults(version: str, kind: str, *, is_cpu: bool, world: int, gpu_bytes: int, gpu_name: str,
                   max_model_len: int, is_mla: bool, is_multimodal: bool, has_sliding_window: bool,
                   platform: str, mnbt_flag: int | None, seqs_flag: int | None,
                   chunked_flag: bool | None = None) -> Batch:
    v = Version(version)
    if kind == "v0":
        seqs = seqs_flag or 256
        long_ctx = max_model_len > 32768
        gpu = platform == "cuda" or (platform == "rocm" and v < Version("0.6.6"))  # 0.6.6 adds `not is_rocm()`
        auto = (long_ctx and not is_multimodal and gpu and not has_sliding_window
                and not (is_mla and v >= Version("0.7.3")))
        chunked = auto if chunked_flag is None else chunked_flag
        if mnbt_flag:
            t, src = mnbt_flag, "--max-num-batched-tokens"
        elif chunked:
            t = 512 if v < Version("0.6.6") else 2048
            src = f"V0 chunked prefill ({'on for max_model_len > 32K' if auto else 'flag'}): {t}"
        else:
            t, src = max(max_model_len, 2048), "V0 without chunked prefill: max(max_model_len, 2048)"
        if is_multimodal and not mnbt_flag:
            t = max(t, 5120)
        return Batch(t, seqs, min(seqs, t), chunked, src)
    if is_cpu:
        t, seqs = 2048 * world, 128 * world
        tier = "vLLM-CPU server defaults"
    elif v >= Version("0.32.0") and gpu_bytes >= 160 * GiB:
        t, seqs, tier = 16384, 1024, ">= 160 GiB device"
    elif gpu_bytes >= 70 * GiB and (v < Version("0.9.0") or "a100" not in gpu_name.lower()):
        t, seqs, tier = 8192, 1024, ">= 70 GiB device" + ("" if v < Version("0.9.0") else ", not A100")
    else:
        t, seqs, tier = 2048, 256, "< 70 GiB device or A100"
    seqs = seqs_flag or seqs
    if mnbt_flag:
        t, src = mnbt_flag, "--max-num-batched-tokens"
    else:
        if is_cpu and is_mla:  # MLA on CPU disables chunked prefill: max(max_model_len, default)
            t = max(max_model_len, t)
        t = min(seqs * max_model_len, t)
        src = f"V1 `vllm serve` default ({tier})"
    return Batch(t, seqs, min(t, seqs), True, src)


def sampler_calibration(kind: str, version: str) -> cal.Calibration:
    if kind == "v0":
        return cal.SAMPLER_NATIVE
    v = Version(version)
    if v < Version("0.14.0"):
        return cal.SAMPLER_V1_EITHER
    # 0.33 adds the Triton top-k/top-p (v1/sample/ops/topk_topp_sampler.py at v0.33.0): the fused figure
    return cal.SAMPLER_V1_LOGGED if v < Version("0.33.0") else cal.SAMPLER_FUSED


@dataclass(frozen=True)
class Activation:
    bytes: int
    low_bytes: int
    high_bytes: int
    forward_bytes: int  # F
    sampler_bytes: int  # S at the calibration's value
    detail: str


def activation_peak(model: ModelSpec, batch: Batch, tp: int, kind: str, version: str, act_bytes: int,
                    driver: bool = True) -> Activation:
    """Peak torch memory of the profile run on one rank (``driver``: the rank that samples in V0)."""
    h, t, d = model.hidden_size, batch.tokens, act_bytes
    inter = model.intermediate_size // tp

    def forward(resid_rows: int) -> int:
        resid = resid_rows * t * h * d
        if model.moe is None:
            return resid + 3 * t * inter * d
        m = model.moe
        chunk = min(t, 32768)  # VLLM_FUSED_MOE_CHUNK_SIZE (fused_moe.py, 0.6.4-0.10.2)
        mi = m.moe_intermediate_size // tp
        out = resid + chunk * m.experts_per_tok * (max(2 * mi, h) + mi) * d + chunk * m.num_experts * 4
        if m.moe_layers < model.num_layers and inter:
            out = max(out, resid + 3 * t * inter * d)
        return out

    fwd, fwd_lo = forward(cal.FORWARD_HIDDEN_ROWS), forward(2)
    fwd_hi = int(fwd * cal.FORWARD_HIGH_FACTOR)
    s_cal = sampler_calibration(kind, version)
    rows, vocab = batch.sampled_rows, model.vocab_size
    if kind == "v0" and not driver:
        lo = mid = hi = rows * (vocab // tp) * d
    else:
        base = t * h * d
        lo, mid, hi = (int(rows * vocab * k) + base for k in (s_cal.low, s_cal.value, s_cal.high))
    detail = (f"T={t:,} tokens, R={rows:,} sampled rows x vocab {vocab:,}: forward {fwd / GiB:.2f} GiB, sampler "
              f"{mid / GiB:.2f} GiB ({s_cal.value:g} B/logit)")
    return Activation(max(fwd, mid), max(fwd_lo, lo), max(fwd_hi, hi), fwd, mid, detail)
