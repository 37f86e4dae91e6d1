"""SGLang's levers, as LeverSpecs (the flags the launch command changes; each rewrite is evaluated like any launch):
the static fraction raised by 0.03 per step while check finds it safe (no error finding, no gpu-headroom-low); fp8
KV; DP attention for MLA models under plain TP at its own largest check-safe fraction; fewer CUDA-graph batch sizes;
a second replica; HiCache (prefix reuse only).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from kvplan.engines.levers import FINE_STEP, LeverInputs, LeverSpec, largest_safe, steps
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.units import GiB


def levers(p: LeverInputs, skipped: list[str]) -> Iterator[LeverSpec]:
    cur = p.current
    s, pool = sglang_settings(cur), cur.per_rank.static
    mfs, cell = s.mem_fraction_static, cur.per_rank.kv_bytes_per_token
    base = pool.baseline_free_bytes if pool else 0

    def mfs_note(x: float) -> str:
        add = (x - mfs) * base / cell if cell else 0
        return (f"+{x - mfs:.2f} × baseline P {base / GiB:.2f} GiB per rank / {cell:,} B per token = "
                f"+{add:,.0f} tokens per rank")

    yield from steps(p, "--mem-fraction-static", "fraction", mfs, skipped, mfs_note)
    if "fp8" not in s.kv_cache_dtype:
        yield LeverSpec("fp8 KV", {"--kv-cache-dtype": "fp8_e4m3"},
                        ["half the bytes per token; fp8 KV can change outputs: check quality first"])
    tp, dp = s.tp_size, s.dp_size
    if cur.model.is_mla and tp > 1 and not s.enable_dp_attention:
        yield from _dp_attention(p, skipped)
    yield from _graphs(p, skipped)
    c = cur.cluster
    if not s.enable_dp_attention and 2 * s.world_size <= c.gpus_per_node * c.nodes:
        yield LeverSpec("2 replicas", {"--dp-size": str(dp * 2)},
                        [f"a second copy on {s.world_size} more GPUs (one launch with --dp-size; SGLang's router "
                         "spreads requests)"])
    else:
        yield LeverSpec("2 replicas", {}, [f"a second launch of this command on {s.world_size} more GPUs, behind a "
                                           "router"], replicas=2)
    if not s.hicache.enabled:
        yield _hicache(p)


def _dp_attention(p: LeverInputs, skipped: list[str]) -> Iterator[LeverSpec]:
    """DP attention (``--enable-dp-attention --dp-size tp``) at its own largest check-safe static fraction.

    Each rank then holds the whole attention block (the weights model: attention replicated over the attention-DP
    ranks) but its own requests' KV (``tp`` pools instead of one pool replicated on every rank). SGLang divides an
    explicit ``--max-running-requests`` by the attention-DP size and sizes each worker's req_to_token table by that
    share (req_pool.py; ``ModelRunner.init_memory_pool``): the lever caps the running requests at 1.25 × the most
    requests the server had in flight (running + waiting), rounded up to a multiple of ``tp``, when that is below the
    current cap. The fraction is then the largest one (0.01 steps) with no error and no gpu-headroom-low."""
    cur = p.current
    s = sglang_settings(cur)
    tp, mfs = s.tp_size, s.mem_fraction_static
    flags: dict = {"--enable-dp-attention": "", "--dp-size": str(tp)}
    notes = [f"MLA under plain TP keeps the same KV on all {tp} ranks; with DP attention each rank holds its own "
             f"requests ({tp} pools), attention weights are replicated per rank",
             "the per-request decode speed changes with DP attention (not modelled)"]
    demand = p.inflight_max
    if demand:
        cap = math.ceil(demand * 1.25 / tp) * tp
        if cap < cur.per_replica.max_running_requests:
            flags["--max-running-requests"] = str(cap)
            notes.append(f"--max-running-requests {cap} (1.25 × {demand} in flight at most): {cap // tp} request "
                         f"slots per DP worker, which sizes its req_to_token table")
    x, above = largest_safe(p, "--mem-fraction-static", mfs, flags)
    if x is None:
        skipped.append(f"DP attention: no check-safe --mem-fraction-static from {mfs:.2f} to 0.98 ({above})")
        return
    if x != mfs:
        flags["--mem-fraction-static"] = f"{x:.2f}"
    nxt = f"{x + FINE_STEP:.2f} gives {above}" if above else "the top of the range"
    notes.insert(0, f"priced at --mem-fraction-static {x:.2f}, the largest check-safe fraction with DP attention "
                 f"({nxt})")
    yield LeverSpec("DP attention", flags, notes)


def _graphs(p: LeverInputs, skipped: list[str]) -> Iterator[LeverSpec]:
    s, running_max = sglang_settings(p.current), p.running_max
    bs = s.cuda_graph_max_bs
    if not bs or running_max is None:
        return
    target = max(8, math.ceil(running_max * 1.25 / 8) * 8)
    if target >= bs:
        return
    flags: dict = {"--cuda-graph-max-bs": str(target)}
    seen = f"{p.graph_gib:.2f} GiB per rank in the log" if p.graph_gib else f"about {s.cuda_graph_estimate}"
    notes = [f"captures decode graphs up to {target} (from {bs}; {running_max} ran at most); graph memory "
             f"{seen}", "SGLang sizes the KV pool before capturing graphs: at the same fraction the pool is "
             "unchanged; the memory freed makes a higher fraction safe"]
    if s.mem_fraction_static_source == "--mem-fraction-static":
        try:  # the engine's own default-fraction reserve for both batch sizes
            d_old = sglang_settings(p.plan_of({"--mem-fraction-static": None})).mem_fraction_static
            d_new = sglang_settings(p.plan_of({"--mem-fraction-static": None, "--cuda-graph-max-bs": str(target)})
                                    ).mem_fraction_static
        except Exception as e:  # noqa: BLE001
            skipped.append(f"cuda-graph-max-bs fraction credit: {e}")
            d_old = d_new = 0.0
        gain = round(d_new - d_old, 3)
        if gain >= 0.005:
            x = round(s.mem_fraction_static + gain, 3)
            flags["--mem-fraction-static"] = f"{x:g}"
            notes.append(f"SGLang's default reserve shrinks by {gain:.3f} of the GPU with the smaller graphs: "
                         f"the fraction goes up by as much")
        else:
            notes.append("SGLang's default reserve does not change with it on this GPU (its floor applies): "
                         "no KV is credited")
    yield LeverSpec(f"graphs bs≤{target}", flags, notes)


def _hicache(p: LeverInputs) -> LeverSpec:
    flags: dict = {"--enable-hierarchical-cache": "", "--hicache-ratio": "2"}
    size = None
    if p.host_known:
        host_fix = p.plan_of(flags).settings.host_fix
        size = host_fix.flags.get("--hicache-size") if host_fix else None
    if size:
        flags.update({"--hicache-size": size, "--hicache-ratio": None})
    host = p.plan_of(flags).per_rank.host_kv_tokens
    return LeverSpec("HiCache", flags,
                     [f"host pool {host:,} tokens per rank extends the prefix cache only: prefix hits can rise, "
                      "running requests cannot (same device pool)"]
                     + ([] if size else ["host memory of the server unknown: sized by ratio; check it with "
                                         "kvplan check --host-mem-gib"]), same_pool=True)
