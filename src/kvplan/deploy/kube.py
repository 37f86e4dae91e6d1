"""Kubernetes workloads: Pod, Deployment, StatefulSet, ReplicaSet, DaemonSet, Job, CronJob, LeaderWorkerSet
(and ``List``); any other kind is searched for pod specs (``containers:``), so CRDs that embed one
(KServe, RayService, Helm-rendered operators) work too.

Per container (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/):
``command``/``args`` (``args`` alone run the image's entrypoint; ``$(VAR)`` expands from ``env``),
``resources.limits.memory`` (the cgroup limit: exceeding it is an OOM-kill), ``nvidia.com/gpu`` /
``amd.com/gpu``, ``/dev/shm`` from an ``emptyDir`` with ``medium: Memory`` (its ``sizeLimit``; without one the
pod's memory limit bounds it), ``hostIPC``, and the GPU model from ``nodeSelector`` / node affinity labels.
LeaderWorkerSet: one engine spans ``size`` pods; ``LWS_GROUP_SIZE`` / ``LWS_WORKER_INDEX`` are the values the
LWS controller injects (https://lws.sigs.k8s.io/docs/reference/labels-annotations-and-environment-variables/).
"""

from __future__ import annotations

import re
from typing import Any

from kvplan import validate
from kvplan.deploy import images
from kvplan.deploy.model import Container
from kvplan.deploy.quantity import k8s_bytes
from kvplan.deploy.shell import find_in_tokens, substitute
from kvplan.errors import KvplanError

RUNTIME_DEFAULT_SHM = 64 * 2**20  # containerd / docker default /dev/shm
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
GPU_LABELS = ("nvidia.com/gpu.product", "amd.com/gpu.product-name", "cloud.google.com/gke-accelerator",
              "karpenter.k8s.aws/instance-gpu-name")
SKIPPED_KINDS = {"Service", "ConfigMap", "Secret", "PersistentVolumeClaim", "PersistentVolume", "RuntimeClass",
                 "Namespace", "Ingress", "HorizontalPodAutoscaler", "PodDisruptionBudget", "ServiceAccount", "Role",
                 "RoleBinding", "ClusterRole", "ClusterRoleBinding", "NetworkPolicy", "ServiceMonitor", "PodMonitor",
                 "StorageClass", "PriorityClass", "CustomResourceDefinition", "HTTPRoute", "Gateway"}


def is_kube(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("kind"), str) and "apiVersion" in doc


def _count(name: str, value: Any, default: int = 1) -> int:
    return default if value is None else validate.count(name, value, 1, validate.MAX_RANKS)


def _pod_specs(doc: dict, where: str) -> list[tuple[str, dict, int, dict]]:
    """(role, pod spec, pods per engine, injected env) of a workload document."""
    kind, spec = doc["kind"], validate.mapping(f"{where} spec", doc.get("spec"))

    def pod_of(template: Any, what: str) -> dict:
        return validate.mapping(f"{where} {what}.spec", validate.mapping(f"{where} {what}", template).get("spec"))

    if kind == "Pod":
        return [("", spec, 1, {})]
    if kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job"):
        return [("", pod_of(spec.get("template"), "template"), 1, {"POD_INDEX": "0"})]
    if kind == "CronJob":
        job = validate.mapping(f"{where} jobTemplate.spec",
                               validate.mapping(f"{where} jobTemplate", spec.get("jobTemplate")).get("spec"))
        return [("", pod_of(job.get("template"), "jobTemplate.spec.template"), 1, {})]
    if kind == "LeaderWorkerSet":
        lwt = validate.mapping(f"{where} leaderWorkerTemplate", spec.get("leaderWorkerTemplate"))
        size = _count(f"{where} leaderWorkerTemplate.size", lwt.get("size") or None)
        env = {"LWS_GROUP_SIZE": str(size), "LWS_LEADER_ADDRESS": "leader"}
        out = []
        if lwt.get("leaderTemplate"):
            out.append(("leader", pod_of(lwt["leaderTemplate"], "leaderTemplate"), size,
                        {**env, "LWS_WORKER_INDEX": "0"}))
        if lwt.get("workerTemplate"):
            out.append(("worker", pod_of(lwt["workerTemplate"], "workerTemplate"), size,
                        {**env, "LWS_WORKER_INDEX": "1"}))
        return out
    found: list[tuple[str, dict, int, dict]] = []
    _search(spec, found, 0, [20_000])
    return found


def _search(node: Any, found: list, depth: int, budget: list[int]) -> None:
    """Pod specs anywhere inside an unknown kind (bounded depth and node count: YAML aliases can make a small
    file a huge tree)."""
    budget[0] -= 1
    if depth > 12 or budget[0] < 0:
        return
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            found.append(("", node, 1, {}))
            return
        for v in node.values():
            _search(v, found, depth + 1, budget)
    elif isinstance(node, list):
        for v in node:
            _search(v, found, depth + 1, budget)


def _env(container: dict, injected: dict[str, str], where: str) -> tuple[dict[str, str], list[str]]:
    env, unknown = dict(injected), []
    for e in validate.sequence(f"{where} env", container.get("env")):
        if not isinstance(e, dict) or "name" not in e:
            continue
        name = validate.text(f"{where} env name", e["name"], max_len=1024, scalar=True)
        if "value" in e:
            env[name] = "" if e["value"] is None else validate.text(f"{where} env {name}", e["value"], scalar=True,
                                                                     max_len=validate.MAX_ARG)
            continue
        ref = validate.mapping(f"{where} env {name} valueFrom", e.get("valueFrom"))
        path = ref.get("fieldRef", {}).get("fieldPath", "") if isinstance(ref.get("fieldRef"), dict) else ""
        if isinstance(path, str) and path.endswith("pod-index']"):
            env[name] = "0"
        else:
            unknown.append(name)
    return env, unknown


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, (str, int, float)) for t in value):
        raise KvplanError(f"{where}: command/args must be lists of strings")
    return [validate.text(f"{where} command/args", t, scalar=True, max_len=validate.MAX_ARG) for t in value]


def _shm(pod: dict, mounts: list, mem_limit: int | None, where: str) -> tuple[int | None, str, bool]:
    if pod.get("hostIPC") is True:
        return None, "hostIPC: true (the host's /dev/shm)", True
    for m in mounts:
        if not isinstance(m, dict) or str(m.get("mountPath", "")).rstrip("/") != "/dev/shm":
            continue
        for v in validate.sequence(f"{where} volumes", pod.get("volumes")):
            if isinstance(v, dict) and v.get("name") == m.get("name") and isinstance(v.get("emptyDir"), dict):
                ed = v["emptyDir"]
                if ed.get("sizeLimit") is not None:
                    size = k8s_bytes(ed["sizeLimit"], f"{where} emptyDir sizeLimit")
                    return size, f"emptyDir sizeLimit: {ed['sizeLimit']}", False
                if mem_limit:
                    return mem_limit, "memory emptyDir without sizeLimit (bounded by the memory limit)", False
                return None, "memory emptyDir without sizeLimit (node memory)", False
        return None, f"/dev/shm mounted from volume {str(m.get('name'))[:60]!r}", False
    return RUNTIME_DEFAULT_SHM, "the container runtime's default 64 MB (no /dev/shm volume, no hostIPC)", False


def _gpu_product(pod: dict) -> str | None:
    sel = pod.get("nodeSelector") or {}
    for key in GPU_LABELS:
        if isinstance(sel, dict) and isinstance(sel.get(key), str) and sel[key]:
            return validate.text(f"nodeSelector {key}", sel[key], max_len=256)
    aff = pod.get("affinity")
    na = aff.get("nodeAffinity") if isinstance(aff, dict) else None
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(na, dict) else None
    terms = req.get("nodeSelectorTerms") if isinstance(req, dict) else None
    for term in terms if isinstance(terms, list) else []:
        exprs = term.get("matchExpressions") if isinstance(term, dict) else None
        for ex in exprs if isinstance(exprs, list) else []:
            if isinstance(ex, dict) and ex.get("key") in GPU_LABELS and ex.get("operator") == "In" \
                    and isinstance(ex.get("values"), list) and ex["values"] and isinstance(ex["values"][0], str):
                return validate.text("node affinity values", ex["values"][0], max_len=256)
    return None


def _gpus(limits: dict, requests: dict, where: str) -> int | None:
    for lim in (limits, requests):
        for g in GPU_RESOURCES:
            if g in lim:
                return validate.count(f"{where} {g}", validate.text(f"{where} {g}", lim[g], scalar=True, max_len=64),
                                      0, validate.MAX_RANKS)
    return None


_CAT = re.compile(r"^\$\(\s*cat\s+([^\s()$`;|&]+)\s*\)$")  # a whole word "$(cat /path)"


def config_maps(docs: list, source: str) -> dict[str, dict[str, str]]:
    """The ConfigMaps of the input: name -> data (string values only)."""
    out: dict[str, dict[str, str]] = {}
    for d in docs:
        if is_kube(d) and d["kind"] == "ConfigMap" and isinstance(d.get("metadata"), dict):
            data = validate.mapping(f"{source}: ConfigMap data", d.get("data"))
            out[str(d["metadata"].get("name"))] = {str(k): v for k, v in data.items() if isinstance(v, str)}
    return out


def _files(pod: dict, mounts: list, maps: dict[str, dict[str, str]]) -> dict[str, tuple[str, str]]:
    """path -> (content, ConfigMap name) of the container's ConfigMap volumes whose ConfigMap is known."""
    vols = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)}
    out: dict[str, tuple[str, str]] = {}
    for m in mounts:
        if not isinstance(m, dict):
            continue
        vol = vols.get(m.get("name"))
        cm = vol.get("configMap") if isinstance(vol, dict) else None
        name = str(cm.get("name")) if isinstance(cm, dict) else ""
        data = maps.get(name)
        if not data or not isinstance(m.get("mountPath"), str):
            continue
        base = m["mountPath"].rstrip("/")
        if isinstance(m.get("subPath"), str):
            if m["subPath"] in data:
                out[base] = (data[m["subPath"]], name)
            continue
        out.update((f"{base}/{k}", (v, name)) for k, v in data.items())
    return out


def _cat(argv: list[str], files: dict[str, tuple[str, str]], notes: list[str]) -> list[str]:
    """``$(cat /path)`` words read from the container's ConfigMap files the input shows."""
    out = []
    for t in argv:
        m = _CAT.match(t) if "$(" in t else None
        if m and m.group(1) in files:
            content, name = files[m.group(1)]
            notes.append(f"$(cat {m.group(1)}) read from ConfigMap {name[:253]}")
            t = content
        out.append(t)
    return out


def from_kube(doc: dict, source: str, maps: dict[str, dict[str, str]] | None = None) -> list[Container]:
    """Engine containers of one workload document; ``maps`` are the ConfigMaps of the input (name -> data), so
    ``$(cat <file>)`` from a ConfigMap volume reads its content."""
    kind = doc["kind"]
    if kind == "List":
        return [c for item in validate.sequence(f"{source}: List items", doc.get("items")) if is_kube(item)
                for c in from_kube(item, source, maps)]
    meta = doc.get("metadata")
    name = str(meta.get("name") or "?")[:253] if isinstance(meta, dict) else "?"
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    namespace = ns[:63] if isinstance(ns, str) and ns else None  # a DNS label: at most 63 characters
    spec = doc.get("spec")
    replicas = _count(f"{source}: {kind}/{name} replicas", spec.get("replicas") or None) \
        if isinstance(spec, dict) else 1
    out: list[Container] = []
    for role, pod, pods, injected in _pod_specs(doc, f"{source}: {kind}/{name}"):
        if not isinstance(pod, dict):
            continue
        for c in validate.sequence(f"{source}: {kind}/{name} containers", pod.get("containers")):
            if not isinstance(c, dict):
                continue
            where = f"{source}: {kind}/{name} container {str(c.get('name'))[:63]}"
            image = validate.optional_text(f"{where} image", c.get("image"), max_len=validate.MAX_IMAGE)
            env, unknown_env = _env(c, injected, where)
            command, args = _strings(c.get("command"), where), _strings(c.get("args"), where)
            missing: list[str] = []
            argv = [substitute(t, env, k8s=True, missing=missing)
                    for t in ([*command, *args] if command else [*(images.entrypoint(image) or ()), *args])]
            hit = find_in_tokens(argv, env)
            if hit is None:
                continue
            res = validate.mapping(f"{where} resources", c.get("resources"))
            limits = validate.mapping(f"{where} resources.limits", res.get("limits"))
            requests = validate.mapping(f"{where} resources.requests", res.get("requests"))
            mem = limits.get("memory")
            mem_bytes = k8s_bytes(mem, f"{where} memory limit") if mem is not None else None
            gpus = _gpus(limits, requests, where)
            mounts = validate.sequence(f"{where} volumeMounts", c.get("volumeMounts"))
            shm, shm_src, ipc = _shm(pod, mounts, mem_bytes, where)
            notes = [f"$({v}) is not set in the manifest; left as written" for v in sorted(set(missing))]
            launch = _cat(hit.argv, _files(pod, mounts, maps or {}), notes) if maps else hit.argv
            notes += [f"env {v} comes from a secret/config the manifest does not show" for v in unknown_env
                      if any(v in t for t in hit.argv)]
            req = requests.get("memory")
            req_bytes = k8s_bytes(req, f"{where} memory request") if req is not None else None
            if mem is None and req is not None:
                notes.append(f"only a memory request ({str(req)[:40]}): no cgroup limit, the node's memory applies; "
                             "the request is what the scheduler reserved")
            workload = f"{kind}/{name}" + (f" ({role})" if role else "")
            out.append(Container(
                source=source, workload=workload, name=str(c.get("name") or "")[:253],
                argv=tuple(images.with_engine_env(launch, env)), env=env, image=image,
                memory_limit_bytes=mem_bytes, memory_limit_source=f"resources.limits.memory: {mem}" if mem else None,
                memory_request_bytes=req_bytes,
                memory_request_source=f"resources.requests.memory: {str(req)[:40]}" if req is not None else None,
                shm_bytes=shm, shm_source=shm_src, ipc_host=ipc, gpus=gpus, gpu_product=_gpu_product(pod),
                nodes=pods, replicas=replicas, engine_version=images.tag_version(image), notes=tuple(notes),
                namespace=namespace))
    return out
