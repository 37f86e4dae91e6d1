"""vLLM production-stack Helm values (``servingEngineSpec.modelSpec[]``), rendered into the Deployments its chart
makes, so each engine is planned like any pod (``Engine.stack_documents``; kvplan.deploy reads the documents).

What the chart's ``helm/templates/deployment-vllm-multi.yaml`` renders per ``modelSpec`` (read at
https://github.com/vllm-project/production-stack/blob/010004eea56fa9ee522a4cf66d363a213fdc67ab/helm/templates/deployment-vllm-multi.yaml
and ``_helpers.tpl`` ``chart.resources``):

* ``vllm serve <modelURL> --host 0.0.0.0 --port 8000``, then from ``vllmConfig``: ``enableChunkedPrefill``
  (``--enable-chunked-prefill`` / ``--no-enable-chunked-prefill``), ``enablePrefixCaching``
  (``--enable-prefix-caching``, else ``--no-enable-prefix-caching``), ``maxModelLen``, ``dtype``,
  ``tensorParallelSize``, ``maxNumSeqs``, ``gpuMemoryUtilization``, ``maxLoras``, then ``extraArgs`` verbatim;
  ``enableLoRA`` (``--enable-lora``);
* ``lmcacheConfig.enabled``: ``--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'``
  (``LMCacheConnector`` when ``vllmConfig.v0`` is 1, with ``VLLM_USE_V1=0``); ``cpuOffloadingBufferSize`` > 0:
  ``LMCACHE_LOCAL_CPU=True`` and ``LMCACHE_MAX_LOCAL_CPU_SIZE=<it>`` (LMCache's local CPU buffer, GiB per rank);
  ``diskOffloadingBufferSize``: ``LMCACHE_MAX_LOCAL_DISK_SIZE``; ``modelSpec.env`` entries after the chart's own;
* resources: ``requests.memory: requestMemory`` (the scheduler's reservation), ``limits.memory: limitMemory`` only
  when given, ``<requestGPUType or nvidia.com/gpu>: requestGPU``;
* ``/dev/shm``: a memory ``emptyDir`` of ``shmSize`` (default ``20Gi``), mounted only when ``tensorParallelSize`` is
  set; ``replicas: replicaCount``; ``nodeSelectorTerms`` as required node affinity.

A ``modelSpec`` with ``raySpec`` (multi-node, rendered as a RayCluster) is not rendered here: its note says so.
"""

from __future__ import annotations

import json
from typing import Any

from kvplan.errors import KvplanError

CHART = "vLLM production-stack values"
_FLAGS = (("maxModelLen", "--max-model-len"), ("dtype", "--dtype"), ("tensorParallelSize", "--tensor-parallel-size"),
          ("maxNumSeqs", "--max-num-seqs"), ("gpuMemoryUtilization", "--gpu_memory_utilization"),
          ("maxLoras", "--max_loras"))


def is_values(doc: Any) -> bool:
    spec = doc.get("servingEngineSpec") if isinstance(doc, dict) else None
    return isinstance(spec, dict) and isinstance(spec.get("modelSpec"), list)


def _scalar(v: Any, where: str) -> str:
    if isinstance(v, bool) or v is None or isinstance(v, (dict, list)):
        raise KvplanError(f"{where}: expected a number or a string, got {type(v).__name__}")
    return str(v)


def _command(ms: dict, where: str) -> tuple[list[str], dict[str, str]]:
    model = ms.get("modelURL")
    if not isinstance(model, str) or not model:
        raise KvplanError(f"{where}: modelURL is required (the chart fails without it)")
    argv = ["vllm", "serve", model, "--host", "0.0.0.0", "--port", "8000"]
    env: dict[str, str] = {}
    if ms.get("enableLoRA"):
        argv.append("--enable-lora")
    vc = ms.get("vllmConfig") or {}
    if not isinstance(vc, dict):
        raise KvplanError(f"{where}: vllmConfig must be a mapping")
    if "enableChunkedPrefill" in vc:
        argv.append("--enable-chunked-prefill" if vc["enableChunkedPrefill"] else "--no-enable-chunked-prefill")
    argv.append("--enable-prefix-caching" if vc.get("enablePrefixCaching") else "--no-enable-prefix-caching")
    for key, flag in _FLAGS:
        if key in vc:
            argv += [flag, _scalar(vc[key], f"{where}: vllmConfig.{key}")]
    extra = vc.get("extraArgs") or []
    if not isinstance(extra, list):
        raise KvplanError(f"{where}: vllmConfig.extraArgs must be a list")
    argv += [_scalar(a, f"{where}: vllmConfig.extraArgs") for a in extra]
    v0 = str(vc.get("v0", "")) == "1"
    if v0:
        env["VLLM_USE_V1"] = "0"
    lm = ms.get("lmcacheConfig") or {}
    if isinstance(lm, dict) and lm.get("enabled"):
        conn = "LMCacheConnector" if v0 else "LMCacheConnectorV1"
        argv += ["--kv-transfer-config", json.dumps({"kv_connector": conn, "kv_role": str(lm.get("kvRole") or
                                                                                           "kv_both")})]
        env["LMCACHE_USE_EXPERIMENTAL"] = "True"
    if isinstance(lm, dict) and "cpuOffloadingBufferSize" in lm:
        size = _scalar(lm["cpuOffloadingBufferSize"], f"{where}: lmcacheConfig.cpuOffloadingBufferSize")
        try:
            positive = int(float(size)) > 0  # the chart tests `gt (int ...) 0`
        except ValueError:
            raise KvplanError(f"{where}: lmcacheConfig.cpuOffloadingBufferSize {size!r} is not a number") from None
        if positive:
            env.update({"LMCACHE_LOCAL_CPU": "True", "LMCACHE_MAX_LOCAL_CPU_SIZE": size})
    if isinstance(lm, dict) and "diskOffloadingBufferSize" in lm:
        env["LMCACHE_MAX_LOCAL_DISK_SIZE"] = _scalar(lm["diskOffloadingBufferSize"], where)
    return argv, env


def _resources(ms: dict) -> dict:
    req: dict[str, Any] = {}
    lim: dict[str, Any] = {}
    if ms.get("requestMemory"):
        req["memory"] = ms["requestMemory"]
    if ms.get("limitMemory"):
        lim["memory"] = ms["limitMemory"]
    gpus = ms.get("requestGPU")
    if gpus:
        kind = str(ms.get("requestGPUType") or "nvidia.com/gpu")
        req[kind] = lim[kind] = gpus
    return {"requests": req, "limits": lim}


def to_kube(doc: dict, source: str, notes: list[str]) -> list[dict]:
    """The Deployments the chart renders for ``doc`` (one per modelSpec); ``notes`` gets what is not rendered."""
    out: list[dict] = []
    for i, ms in enumerate(doc["servingEngineSpec"]["modelSpec"]):
        where = f"{source}: servingEngineSpec.modelSpec[{i}]"
        if not isinstance(ms, dict):
            raise KvplanError(f"{where} must be a mapping")
        name = str(ms.get("name") or f"model{i}")
        if "raySpec" in ms:
            notes.append(f"{where} ({name}) runs on a Ray cluster (raySpec): not planned here")
            continue
        argv, env = _command(ms, where)
        user_env = ms.get("env") or []
        container: dict[str, Any] = {
            "name": "vllm", "image": f"{ms.get('repository') or 'vllm/vllm-openai'}:{ms.get('tag') or 'latest'}",
            "command": argv, "env": [{"name": k, "value": v} for k, v in env.items()]
            + [e for e in user_env if isinstance(e, dict)], "resources": _resources(ms)}
        pod: dict[str, Any] = {"containers": [container]}
        vc = ms.get("vllmConfig") or {}
        if "tensorParallelSize" in vc:
            container["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}]
            pod["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory",
                                                            "sizeLimit": ms.get("shmSize") or "20Gi"}}]
        terms = ms.get("nodeSelectorTerms")
        if terms:
            pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": terms}}}
        out.append({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": f"{name}-deployment-vllm"},
                    "spec": {"replicas": ms.get("replicaCount") or 1, "template": {"spec": pod}}})
    return out
