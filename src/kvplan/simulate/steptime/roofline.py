"""The roofline prior of one forward step on one rank, from the plan's bytes and the GPU's figures.

For a step that computes ``T = B + N`` tokens (``B`` decoding requests, ``N`` prefill tokens) and attends to ``K``
KV tokens, one rank moves and computes

    weights(T) = dense_bytes + expert_bytes × touched(T)         touched(T) = 1 - (1 - k/E)^(T × G)
    kv(K)      = K × kv_bytes_per_token                          (per rank: MLA under plain TP is replicated)
    flops(T)   = 2 × active_params_per_token × T

(``E`` routed experts, ``k`` per token, ``G`` DP-attention groups that run each MoE layer in lock step: the expected
share of experts a batch touches), plus the count of decoding sequences (a per-sequence cost the roofline does
not have). The features the step model is linear in are these divided by the HBM bandwidth
and the dense FLOP/s of the compute dtype, in seconds; the pure roofline ``t = weights + kv + flops`` is a lower
bound of a real step (launch overheads, communication and imperfect overlap are what calibration measures).
Without GPU figures (a CPU launch, an unknown GPU) the features are in nominal units of 1 TB/s and 1 PFLOP/s and
calibration decides their scale.
"""

from __future__ import annotations

from dataclasses import dataclass

NOMINAL_BW_GBPS = 1000.0  # unit scale when the GPU's bandwidth is unknown (not a claim about any device)
NOMINAL_TFLOPS = 1000.0


@dataclass(frozen=True)
class Roofline:
    weights_bytes: int  # per rank
    expert_fraction: float  # share of those bytes in routed experts (0: dense)
    n_experts: int
    experts_per_token: int
    kv_bytes_per_token: int  # per rank
    active_params_per_token: float  # per rank
    lockstep_groups: int = 1
    mem_bw_gbps: float | None = None
    dense_tflops: float | None = None
    hardware_source: str | None = None

    @property
    def known(self) -> bool:
        return bool(self.mem_bw_gbps and self.dense_tflops)

    @property
    def bw_bytes_per_s(self) -> float:
        return (self.mem_bw_gbps or NOMINAL_BW_GBPS) * 1e9

    @property
    def flops_per_s(self) -> float:
        return (self.dense_tflops or NOMINAL_TFLOPS) * 1e12

    def touched(self, tokens: float) -> float:
        if not self.expert_fraction or not self.n_experts:
            return 1.0
        if tokens <= 0:
            return 0.0
        miss = 1.0 - min(1.0, self.experts_per_token / self.n_experts)
        return 1.0 - float(miss ** (tokens * max(1, self.lockstep_groups)))

    def weight_s(self, tokens: float) -> float:
        dense = self.weights_bytes * (1.0 - self.expert_fraction)
        return (dense + self.weights_bytes * self.expert_fraction * self.touched(tokens)) / self.bw_bytes_per_s

    def kv_s(self, kv_tokens: float) -> float:
        return kv_tokens * self.kv_bytes_per_token / self.bw_bytes_per_s

    def compute_s(self, tokens: float) -> float:
        return 2.0 * self.active_params_per_token * tokens / self.flops_per_s

    def features(self, decode: float, kv_tokens: float, prefill_tokens: float = 0.0,
                 prefill_batches: float = 0.0) -> tuple[float, float, float, float, float, float]:
        """(1, weights s, KV s, compute s, prefill-batch count, decoding sequences): the step model's columns. The
        last has no roofline (its prior is 0): what a decoding sequence costs beyond its token's FLOPs (sampling,
        its attention launch, the engine's per-request work), which calibration measures."""
        t = decode + prefill_tokens
        return 1.0, self.weight_s(t), self.kv_s(kv_tokens), self.compute_s(t), prefill_batches, float(decode)

    def summary(self) -> dict:
        return {"weights_bytes_per_rank": self.weights_bytes, "expert_fraction": round(self.expert_fraction, 4),
                "experts": self.n_experts, "experts_per_token": self.experts_per_token,
                "kv_bytes_per_token": self.kv_bytes_per_token,
                "active_params_per_token_per_rank": round(self.active_params_per_token),
                "lockstep_groups": self.lockstep_groups, "mem_bw_gbps": self.mem_bw_gbps,
                "dense_tflops": self.dense_tflops, "hardware_source": self.hardware_source}
