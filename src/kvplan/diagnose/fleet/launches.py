"""Each replica's real launch, from the deployment files given with ``-f`` (Kubernetes manifests, ``kubectl get -o
yaml`` on stdin, Compose files, scripts: ``kvplan.deploy``), matched to the replica by its labels:

1. by pod: a replica whose ``pod`` label is a workload's name, or that name followed by ``-`` and a suffix (the pods
   of a Deployment, StatefulSet, LeaderWorkerSet), gets that workload's engine container; the longest name wins.
   When both the replica's ``namespace`` label and the manifest's ``metadata.namespace`` are known they must be the
   same (``vllm`` in namespace ``team-a`` is not ``vllm`` in ``team-b``); a manifest without a namespace (applied
   with ``kubectl -n``) matches any;
2. else by port: the one launch of the replica's engine whose port (its ``--port``, else the engine's default) is
   the port of the replica's ``instance`` (``host:port``).

The container's launch command is what the levers rewrite and its manifest fills in the plan's inputs as ``check
-f`` does (the GPU from a node selector, the engine version from the image tag: ``deploy.check.options_for``). A
replica no file matches is priced from what its metrics say (vLLM ``cache_config_info`` and the model label).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.deploy.model import Container
from kvplan.diagnose.fleet.discover import Replica
from kvplan.errors import KvplanError


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    options: dict[str, Any]
    source: str  # "Deployment/vllm-kv, container server (k8s.yaml), matched by pod name"
    notes: tuple[str, ...] = ()


@dataclass
class Launches:
    containers: list[tuple[Container, str]] = field(default_factory=list)  # (container, its engine)
    notes: list[str] = field(default_factory=list)

    def match(self, rep: Replica, base: dict[str, Any]) -> Launch | None:
        """The launch of ``rep`` (None: no file says), with ``base`` options (the command line's) as ``check -f``
        merges them."""
        mine = [c for c, eng in self.containers if eng == rep.engine]
        pod, ns = rep.labels.get("pod"), rep.labels.get("namespace")
        found, how = None, ""
        if pod:
            named = [(len(_workload_name(c)), c) for c in mine if _pod_of(c, pod)
                     and not (ns and c.namespace and c.namespace != ns)]
            if named:
                found, how = max(named, key=lambda x: x[0])[1], f"pod {pod}" + (f" in namespace {ns}" if ns else "")
        if found is None:
            port = _port(rep.labels.get("instance", ""))
            on_port = [c for c in mine if port is not None and _launch_port(c) == port]
            if len(on_port) == 1:
                found, how = on_port[0], f"port {port} of instance {rep.labels.get('instance')}"
            elif len(on_port) > 1:
                self.notes.append(f"{rep.instance}: {len(on_port)} launches serve port {port}; none taken (give "
                                  "pod labels, or the one file)")
        if found is None:
            return None
        from kvplan.deploy.check import options_for

        try:
            opts, notes = options_for(found, base)
        except KvplanError as e:
            return Launch(found.argv, dict(base), f"{found.label}, matched by {how}", (f"manifest: {e}",))
        return Launch(found.argv, opts, f"{found.label}, matched by {how}", tuple(found.notes) + tuple(notes))


def read(files: list[str]) -> Launches:
    """The engine containers of the files (``-`` is stdin); a file kvplan cannot read is a one-line error."""
    from kvplan.deploy.loader import read_deployments
    from kvplan.engines import detect_engine, split_command

    out = Launches()
    for c in read_deployments(list(files)):
        try:
            out.containers.append((c, detect_engine(split_command(list(c.argv))).name))
        except KvplanError as e:
            out.notes.append(f"{c.label}: {e}")
    return out


def _workload_name(c: Container) -> str:
    return c.workload.split("/", 1)[-1].split(" (", 1)[0]


def _pod_of(c: Container, pod: str) -> bool:
    name = _workload_name(c)
    return bool(name) and name != "?" and (pod == name or pod.startswith(name + "-"))


def _port(instance: str) -> int | None:
    tail = instance.rsplit(":", 1)[-1] if ":" in instance else ""
    return int(tail) if tail.isdigit() and 0 < int(tail) < 65536 else None


def _launch_port(c: Container) -> int | None:
    from kvplan.engines import detect_engine, split_command

    try:
        lc = split_command(list(c.argv))
        return detect_engine(lc).launch_port(list(c.argv))
    except KvplanError:
        return None
