"""What a deployment file says about one engine container: its launch command and the limits around it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Container:
    """One engine container (a pod's container, a Compose service, a ``docker run``, a Slurm step).

    Sizes are bytes; ``None`` means the file does not say (the node's own figure applies).
    """

    source: str  # "deploy.yaml" (file the container came from)
    workload: str  # "Deployment/sglang-kimi", "service sglang", "docker run", "sbatch job"
    name: str  # container name ("server"), or the workload's own name
    argv: tuple[str, ...]  # the engine launch command, env prefixes included
    env: dict[str, str] = field(default_factory=dict)  # environment the container sets (literal values)
    image: str | None = None
    memory_limit_bytes: int | None = None  # cgroup memory limit of the container (per node for Slurm)
    memory_limit_source: str | None = None  # "resources.limits.memory: 400Gi"
    memory_request_bytes: int | None = None  # the pod's memory request (Kubernetes resources.requests.memory)
    memory_request_source: str | None = None
    shm_bytes: int | None = None  # size of /dev/shm inside the container; None = the host's (ipc host) / unknown
    shm_source: str = "unknown"
    ipc_host: bool = False  # shares the host's IPC namespace (--ipc=host, hostIPC: true)
    gpus: int | None = None  # GPUs given to the container (per node); None = not stated
    gpu_product: str | None = None  # GPU model from node selectors / --gres type, as written
    nodes: int = 1  # nodes (pods) one copy of the engine spans
    replicas: int = 1  # independent copies of this workload
    engine_version: str | None = None  # from the image tag ("vllm/vllm-openai:v0.8.5" -> 0.8.5)
    node_host_bytes: int = 0  # host memory per-node servers of the same input hold beside it (an LMCacheEngine)
    node_host_source: str | None = None  # "LMCacheEngine/my-cache"
    namespace: str | None = None  # Kubernetes metadata.namespace when the manifest says it (None: `-n` decides)
    notes: tuple[str, ...] = ()  # what was assumed or could not be read

    @property
    def label(self) -> str:
        """``Deployment/sglang-kimi, container server (deploy.yaml)``."""
        own = f", container {self.name}" if self.name and self.name != self.workload.split("/")[-1] else ""
        return f"{self.workload}{own} ({self.source})"
