"""shm-too-small: vLLM's native KV offload (0.27+) maps one /dev/shm region of the whole offload size; a
container's default /dev/shm (64 MiB) cannot hold it (0.28+ raises "Insufficient space in /dev/shm")."""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.vllm.settings import vllm_settings
from kvplan.result import Finding
from kvplan.units import GiB

ID = "shm-too-small"


def check(ctx: FindingContext) -> list[Finding]:
    p = ctx.plan
    tiers = [t for t in vllm_settings(p).host_tiers if t.shm_bytes]
    need = sum(t.shm_bytes for t in tiers)
    if not need:
        return []
    have = p.per_node.shm_bytes
    if have is None:
        return [Finding(ID, "info", f"per node: the native offload region needs {need / GiB:,.1f} GiB of /dev/shm "
                        "(unknown for that machine)", "run with --ipc=host or --shm-size at least that large")]
    if have >= need:
        return []
    where = f"the container has {have / GiB:,.2f} GiB ({p.per_node.shm_source})" \
        if p.per_node.shm_source and not p.per_node.shm_source.startswith("detected") \
        else f"this machine has {have / GiB:,.1f} GiB"
    return [Finding(ID, "error", f"per node: the native offload region needs {need / GiB:,.1f} GiB of /dev/shm, "
                    f"{where}", "docker: --ipc=host or --shm-size; Kubernetes: an emptyDir with medium: Memory "
                    f"mounted at /dev/shm (sizeLimit above the region); or lower {_size_setting(tiers)}")]


def _size_setting(tiers: list) -> str:
    """The setting that sizes the region: --kv-offloading-size, or the connector's own cpu_bytes_to_use (KServe's
    kvCacheOffloading.cpu writes it)."""
    flags = {t.flag for t in tiers}
    return "--kv-offloading-size" if flags <= {"--kv-offloading-size"} else \
        "cpu_bytes_to_use in --kv-transfer-config (KServe: spec.kvCacheOffloading.cpu)"
