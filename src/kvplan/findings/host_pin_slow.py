"""host-pin-slow (warning): pinning the node's host memory alone takes longer than 5 minutes.

Signals: the host ledger's pinned rows (HiCache pools, vLLM's offload region, LMCache, ``--cpu-offload-gb``, KVBM,
AIBrix, Mooncake over RDMA), summed over the node, at the platform's pin rate (``hostmem.PIN_RATE``: fault, zero and
``cudaHostRegister``, serialized in the driver across processes) take more than ``hostmem.PIN_WARN_S`` seconds.
Cause: every page of a pinned pool is faulted in, zeroed and locked at start-up, one thread at a time; meanwhile the
launch is not ready and other CUDA processes on the node stall on the driver's locks (TensorRT-LLM #17429: ~12
minutes for ~700 GB, neighbours stuck in cudaMemGetInfo; vLLM #42632: TB-scale cudaHostRegister blocks start-up).
Fix: a smaller pool (the bytes that pin in 5 minutes at the rate), and the engine's asynchronous or parallel pinning
where its version has it (the rows' notes). An oversubscribed node gets it too: its ranks pin until the host runs
dry, which takes about its available memory over the rate.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.hostmem import PIN_WARN_S, PINNED, each
from kvplan.ledger import judge
from kvplan.result import Finding
from kvplan.units import GB

ID = "host-pin-slow"


def check(ctx: Context) -> list[Finding]:
    p = ctx.plan
    if not p.per_node.host_kv_bytes and not p.per_node.ranks:
        return []
    j = judge(p)
    led = j.ledger
    secs, fast, slow = led.pin_seconds()
    if secs <= PIN_WARN_S:
        return []
    pinned = [r for r in led.rows if r.memory == PINNED and r.node_bytes]
    terms = "; ".join(each(r) for r in pinned)
    rate = led.pin_rate
    msg = (f"per node: {led.pinned_bytes / GB:,.0f} GB pinned ({terms}) takes about {secs / 60:,.0f} minutes to pin "
           f"at {rate.value / GB:g} GB/s ({fast / 60:,.1f}–{slow / 60:,.0f} minutes at {rate.high / GB:g}–"
           f"{rate.low / GB:g} GB/s); page-locking is serialized in the driver, so the server is not "
           "ready meanwhile and other CUDA processes on the node stall (TensorRT-LLM #17429)")
    if j.over_node and p.per_node.host_available_bytes is not None:
        dry = p.per_node.host_available_bytes / rate.value
        msg += f"; on this node the ranks run the host dry after about {dry / 60:,.0f} minutes of it"
    fits = int(PIN_WARN_S * rate.value)
    notes = "; ".join(dict.fromkeys(r.note for r in pinned if r.note))
    fix = (f"pin less: {fits / GB:,.0f} GB per node pins in {PIN_WARN_S / 60:.0f} minutes at {rate.value / GB:g} GB/s"
           + (f"; {notes}" if notes else ""))
    return [Finding(ID, "warning", msg, fix)]
