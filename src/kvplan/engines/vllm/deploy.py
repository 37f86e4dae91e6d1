"""vLLM inside a deployment: its images and their entrypoint, the environment it reads (LMCache's too), and what it
does about a cgroup limit.

- ``vllm/vllm-openai``: ``ENTRYPOINT ["vllm", "serve"]`` (https://github.com/vllm-project/vllm/blob/v0.11.0/docker/
  Dockerfile, target ``vllm-openai``); older tags ran ``python3 -m vllm.entrypoints.openai.api_server``, the same
  server for kvplan. The ROCm image ``vllm/vllm-openai-rocm`` uses the same entrypoint. ``rocm/vllm*`` images set
  none (the manifest gives the command).
- Environment: ``VLLM_*`` (``vllm/envs.py``) and ``LMCACHE_*`` (LMCache's config from the environment).
- /dev/shm for its own queues (``ipc_shm_bytes``), with more than one worker: ``MessageQueue`` buffers are
  ``SharedMemory`` segments of ``(max_chunk_bytes + 1 + n_reader) × max_chunks`` bytes
  (``distributed/device_communicators/shm_broadcast.py::ShmRingBuffer.__init__``): the V1 executor's scheduler
  broadcast (``v1/executor/multiproc_executor.py::MultiprocExecutor._init_executor``: max_chunk_bytes
  ``VLLM_MQ_MAX_CHUNK_BYTES_MB`` = 16 MiB by default in 0.9.2-0.33.0, the 10 MiB default before; 10 chunks) and
  the TP group's broadcaster (``distributed/parallel_state.py::GroupCoordinator.__init__``: 4 MiB × 6 chunks, every
  version read 0.7.3-0.33.0). tmpfs hands them out lazily, so a smaller /dev/shm fails with SIGBUS ("Bus error")
  once the queue fills, not at start-up.
- cgroup: 0.33's ``check_cgroup_memory_available`` (``vllm/utils/cpu_resource_utils.py``, called when the native
  offload region is created) only logs a warning and allocates anyway; older versions do not look (reference
  vllm-lmcache-memory.md, "/dev/shm region").
"""

from __future__ import annotations

from kvplan.engines.versions import Version
from kvplan.result import Plan

ENTRYPOINTS: dict[str, tuple[str, ...]] = {
    "vllm/vllm-openai": ("vllm", "serve"),
    "vllm/vllm-openai-rocm": ("vllm", "serve"),
}
IMAGE_HINTS = ("vllm",)
ENV_PREFIXES = ("VLLM_", "LMCACHE_")


MQ_CHUNKS = 10  # MessageQueue max_chunks default (shm_broadcast.py, 0.7.3-0.33.0)
TP_MQ_BYTES, TP_MQ_CHUNKS = 1 << 22, 6  # GroupCoordinator's create_from_process_group(cpu_group, 1 << 22, 6)


def ipc_shm_bytes(plan: Plan) -> int | None:
    """Bytes of /dev/shm the workers of one engine on a node map for their message queues (0 with one worker)."""
    from kvplan.engines.vllm.settings import vllm_settings

    s = vllm_settings(plan)
    world = s.world_size
    if world <= 1:
        return 0
    total = (TP_MQ_BYTES + 1 + world) * TP_MQ_CHUNKS if s.tensor_parallel_size > 1 else 0
    if s.engine_kind == "v1":
        chunk = (16 if Version(plan.engine_version).release >= (0, 9, 2, 0) else 10) << 20
        total += (chunk + 1 + world) * MQ_CHUNKS
    return total


def cgroup_note(plan: Plan) -> str | None:
    if not plan.per_node.host_kv_bytes:
        return None
    if Version(plan.engine_version).release >= (0, 33, 0, 0):
        return (f"vLLM {plan.engine_version} only warns when the cgroup lacks headroom "
                "(check_cgroup_memory_available) and allocates anyway: the kernel OOM-kills the container")
    return f"vLLM {plan.engine_version} does not look at the cgroup: the kernel OOM-kills the container"
