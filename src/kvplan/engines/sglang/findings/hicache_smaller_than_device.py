"""hicache-smaller-than-device: the host pool holds fewer tokens than the GPU pool.

SGLang <= 0.5.14 asserts "The host memory should be larger than the device memory with the current protocol"
(error); later versions only warn that L2 effectiveness is reduced.
Signals: HiCache on, host tokens per rank <= device tokens per rank. Fix: a --hicache-size 10 % above the GPU pool;
where the version asserts (error) and no such pool fits the node (the host fix's size), drop HiCache.
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Finding, HostFix

ID = "hicache-smaller-than-device"


def check(ctx: FindingContext) -> list[Finding]:
    p, r = ctx.plan, ctx.plan.per_rank
    hc = sglang_settings(p).hicache
    if not hc.enabled or r.host_kv_tokens > r.kv_tokens:
        return []
    fatal = hc.host_must_exceed_device
    msg = (f"per rank: host pool {r.host_kv_tokens:,} tokens <= GPU pool {r.kv_tokens:,} tokens"
           + ("; this SGLang version asserts host > device and fails at startup" if fatal
              else "; SGLang warns that the host tier adds little"))
    need_gb = int(r.kv_tokens * r.kv_bytes_per_token * 1.1 / 1e9) + 1
    fix = f"--hicache-size of at least {need_gb} GB per rank (or drop --enable-hierarchical-cache)"
    if not fatal:
        return [Finding(ID, "warning", msg, fix)]
    # the fixed command must start: a host pool above the GPU pool that the node holds, or no HiCache at all
    largest = _largest_fitting_gb(sglang_settings(p).host_fix)
    if largest is not None and largest < need_gb:
        off: dict[str, str | None] = {"--enable-hierarchical-cache": None, "--hicache-size": None,
                                      "--hicache-ratio": None, "--hicache-write-policy": None,
                                      "--hicache-io-backend": None}
        return [Finding(ID, "error", msg, f"no host pool above the GPU pool fits the node (at most {largest} GB per "
                        f"rank, {need_gb} GB needed): drop --enable-hierarchical-cache", off)]
    return [Finding(ID, "error", msg, fix, {"--hicache-size": str(need_gb), "--hicache-ratio": None})]


def _largest_fitting_gb(fix: HostFix | None) -> int | None:
    """The --hicache-size the host fix sizes to fit the node (None: host memory not given)."""
    size = fix.flags.get("--hicache-size") if fix is not None else None
    return int(size) if size is not None else (0 if fix is not None else None)
