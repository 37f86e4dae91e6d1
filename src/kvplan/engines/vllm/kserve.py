"""KServe ``LLMInferenceService`` (serving.kserve.io v1alpha1 / v1alpha2), rendered into the Deployment or
LeaderWorkerSet its controller makes, with the vLLM launch of KServe's well-known presets, so each engine is planned
like any pod (``Engine.stack_documents``; kvplan.deploy reads the documents).

Read at kserve/kserve aaac4e2 (v0.20.0-rc0+104), ``BASE`` below:

* the API (``pkg/apis/serving/v1alpha2/llm_inference_service_types.go``; v1alpha1 has the same workload fields
  without ``kvCacheOffloading``): ``spec.model.uri`` (required; ``hf://org/name``), ``spec.model.name`` (the served
  name, default ``metadata.name``), and the inlined ``WorkloadSpec``: ``replicas``, ``parallelism`` (``tensor``,
  ``pipeline``, ``data``, ``dataLocal``, ``dataRPCPort``, ``expert``), ``template`` / ``worker`` (pod specs; the
  engine container is named ``main``), ``kvCacheOffloading`` (``cpu``: a quantity, ``evictionPolicy``: lru | arc,
  ``secondary[].fileSystem``); ``spec.prefill`` is a second ``WorkloadSpec`` (prefill/decode disaggregation). The
  CRD (``config/crd/full/llmisvc/serving.kserve.io_llminferenceservices.yaml``) puts ``kvCacheOffloading`` directly
  under ``spec``: the docs sample's ``spec.workload.kvCacheOffloading``
  (``docs/samples/llmisvc/kv-cache-offloading/``) is not a field, and the API server prunes it.
* the presets the controller merges under the user's spec (``pkg/controller/v1alpha2/llmisvc/config_merge.go``
  ``combineBaseRefsConfig``): no ``worker``: ``config/llmisvcconfig/config-llm-template.yaml`` (prefill/decode:
  ``config-llm-prefill-template.yaml`` / ``config-llm-decode-template.yaml``); ``worker`` with data parallelism:
  ``config-llm-worker-data-parallel.yaml`` (a LeaderWorkerSet of ``data / dataLocal`` pods); the pipeline-parallel
  presets are not shipped. Their ``main`` container runs ``vllm serve /mnt/models --served-model-name <name>
  --port 8000 [--kv-transfer-config ...] [--tensor-parallel-size <tensor>] $VLLM_ADDITIONAL_ARGS <args>`` (decode:
  port 8001 behind a routing sidecar; data parallel: ``--data-parallel-size <data> --data-parallel-size-local
  <dataLocal>``, ``--headless`` on workers) with a memory ``emptyDir`` of 1Gi at /dev/shm (8Gi for data parallel);
  the image ``ghcr.io/llm-d/llm-d-cuda:v0.9.0``.
* ``kvCacheOffloading`` -> ``--kv-transfer-config`` (``config_merge.go`` ``kvTransferConfig``):
  ``{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":
  "TieringOffloadingSpec","cpu_bytes_to_use":<cpu in bytes>,"eviction_policy":...,"secondary_tiers":[{"type":"fs",
  "root_dir":"/mnt/kv-cache-<i>"}]}}``, added only when the image's vLLM is 0.22.0 or newer and the user's args and
  ``VLLM_ADDITIONAL_ARGS`` do not give their own ``--kv-transfer-config``.
"""

from __future__ import annotations

import json
from typing import Any

from kvplan import validate
from kvplan.errors import KvplanError

STACK = "KServe LLMInferenceService"
BASE = "https://github.com/kserve/kserve/blob/aaac4e294dae2c7b1aa1886447793f3aa1c30912/"
PRESET_IMAGE = "ghcr.io/llm-d/llm-d-cuda:v0.9.0"  # config/llmisvcconfig/config-llm-template.yaml
PRESET_ENV = {"HOME": "/home", "VLLM_LOGGING_LEVEL": "INFO", "HF_HUB_CACHE": "/models"}
SHM = {"single": "1Gi", "data-parallel": "8Gi"}  # the presets' dshm emptyDir sizeLimit
DP_RPC_PORT = 5555
API_SERVER_COUNT = "8"  # ${VLLM_API_SERVER_COUNT:-8} on the data-parallel leader
_KINDS = ("LLMInferenceService", "LLMInferenceServiceConfig")


def is_llmisvc(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") in _KINDS \
        and isinstance(doc.get("apiVersion"), str) and doc["apiVersion"].startswith("serving.kserve.io/")


def _model(spec: dict, name: str, where: str) -> tuple[str, str, list[str]]:
    """(the model kvplan plans, the served name, notes) from ``spec.model``."""
    model = validate.mapping(f"{where} spec.model", spec.get("model"))
    uri = model.get("uri")
    if uri is None or uri == "":
        raise KvplanError(f"{where}: spec.model.uri is required (the CRD requires it)",
                          "e.g. spec.model.uri: hf://Qwen/Qwen2.5-7B-Instruct")
    uri = validate.text(f"{where} spec.model.uri", uri, max_len=2048, scalar=True)
    served = validate.optional_text(f"{where} spec.model.name", model.get("name"), max_len=1024) or name
    notes: list[str] = []
    if uri.startswith("hf://"):
        repo = "/".join(uri[len("hf://"):].split("/")[:2])
        if not repo or repo.startswith("/"):
            raise KvplanError(f"{where}: spec.model.uri {uri[:80]!r} names no Hugging Face repository",
                              "write it as hf://org/name")
        notes.append(f"KServe serves /mnt/models, which its storage initializer fills from {uri[:200]}: "
                     f"planned as {repo}")
        return repo, served, notes
    notes.append(f"spec.model.uri {uri[:200]} is not hf://: planned as the served name {served!r} "
                 "(give its Hugging Face id in spec.model.name, or plan the command with the id)")
    return served, served, notes


def _int(where: str, field: str, value: Any, lo: int = 1) -> int | None:
    return None if value is None else validate.count(f"{where} {field}", value, lo, validate.MAX_RANKS,
                                                      hint=f"a whole number, at least {lo} (an int32 in the CRD)")


def _offload(ws: dict, where: str, field: str, notes: list[str]) -> str | None:
    """The ``--kv-transfer-config`` KServe adds for ``kvCacheOffloading`` (None without it)."""
    from kvplan.quantity import k8s_bytes

    kv = validate.mapping(f"{where} {field}", ws.get("kvCacheOffloading"))
    if not kv:
        return None
    if kv.get("cpu") is None:
        raise KvplanError(f"{where}: {field}.cpu is required (the CPU RAM tier, e.g. \"10Gi\")")
    cpu = k8s_bytes(validate.text(f"{where} {field}.cpu", kv["cpu"], scalar=True, max_len=64),
                    f"{where} {field}.cpu")
    policy = validate.optional_text(f"{where} {field}.evictionPolicy", kv.get("evictionPolicy"), max_len=16) or "lru"
    if policy not in ("lru", "arc"):
        raise KvplanError(f"{where}: {field}.evictionPolicy {policy!r} is not lru or arc (the CRD's enum)")
    extra: dict[str, Any] = {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": cpu,
                             "eviction_policy": policy}
    tiers = [{"type": "fs", "root_dir": f"/mnt/kv-cache-{i}"}
             for i, s in enumerate(validate.sequence(f"{where} {field}.secondary", kv.get("secondary")))
             if isinstance(s, dict) and s.get("fileSystem") is not None]
    if tiers:
        extra["secondary_tiers"] = tiers
        notes.append(f"{field}.secondary: {len(tiers)} disk tier(s) after the CPU tier (not host memory)")
    notes.append(f"{field}.cpu {kv['cpu']} -> OffloadingConnector cpu_bytes_to_use {cpu:,} (one engine's CPU tier); "
                 "KServe adds it only when the image's vLLM is 0.22.0 or newer")
    return json.dumps({"kv_connector": "OffloadingConnector", "kv_connector_extra_config": extra,
                       "kv_role": "kv_both"}, sort_keys=True, separators=(",", ":"))  # Go's json.Marshal order


def _main(pod: dict, where: str) -> dict:
    for c in validate.sequence(f"{where} containers", pod.get("containers")):
        if isinstance(c, dict) and c.get("name") == "main":
            return c
    return {}


def _env(main: dict, where: str) -> tuple[list[dict], list[str]]:
    """The preset's env with the user's on top (merged by name), and ``VLLM_ADDITIONAL_ARGS`` split into words."""
    from kvplan.shellwords import split

    user = [e for e in validate.sequence(f"{where} main env", main.get("env")) if isinstance(e, dict)]
    names = {e.get("name") for e in user}
    env = [{"name": k, "value": v} for k, v in PRESET_ENV.items() if k not in names] + user
    extra: list[str] = []
    for e in user:
        if e.get("name") == "VLLM_ADDITIONAL_ARGS" and e.get("value") is not None:
            extra = split(validate.text(f"{where} env VLLM_ADDITIONAL_ARGS", e["value"], scalar=True,
                                        max_len=validate.MAX_ARG))
    return env, extra


def _pod(user: dict, main: dict, argv: list[str] | None, env: list[dict], shm: str, where: str) -> dict:
    """The user's pod spec over the preset's: the ``main`` container with KServe's launch (unless it sets its own
    command), its /dev/shm volume (unless the user names one ``dshm``)."""
    container = {k: v for k, v in main.items() if k not in ("command", "args", "env")}
    container.update({"name": "main", "image": main.get("image") or PRESET_IMAGE, "env": env})
    if argv is None:  # the user's command replaces the preset's (a strategic merge replaces lists of strings)
        container.update({"command": main.get("command"), "args": main.get("args")})
    else:
        container["command"] = argv
    mounts = [m for m in validate.sequence(f"{where} main volumeMounts", main.get("volumeMounts"))
              if isinstance(m, dict)]
    if not any(str(m.get("mountPath", "")).rstrip("/") == "/dev/shm" for m in mounts):
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    container["volumeMounts"] = mounts
    volumes = [v for v in validate.sequence(f"{where} volumes", user.get("volumes")) if isinstance(v, dict)]
    if not any(v.get("name") == "dshm" for v in volumes):
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}})
    others = [c for c in validate.sequence(f"{where} containers", user.get("containers"))
              if isinstance(c, dict) and c.get("name") != "main"]
    return {**{k: v for k, v in user.items() if k not in ("containers", "volumes")},
            "containers": [container, *others], "volumes": volumes}


def _workload(ws: dict, meta: dict, where: str, role: str, notes: list[str]) -> list[dict]:
    """The Deployment / LeaderWorkerSet KServe makes of one ``WorkloadSpec`` (role: "", "prefill", "decode")."""
    field = "spec.prefill" if role == "prefill" else "spec"
    replicas = _int(where, f"{field}.replicas", ws.get("replicas"), lo=0)
    if replicas == 0:
        notes.append(f"{field}.replicas is 0 (scaled to zero): planned as one replica")
    if ws.get("scaling") is not None:
        notes.append(f"{field}.scaling: autoscaled, planned per replica")
    par = validate.mapping(f"{where} {field}.parallelism", ws.get("parallelism"))
    tp, pp = _int(where, f"{field}.parallelism.tensor", par.get("tensor")), \
        _int(where, f"{field}.parallelism.pipeline", par.get("pipeline"))
    dp, dpl = _int(where, f"{field}.parallelism.data", par.get("data")), \
        _int(where, f"{field}.parallelism.dataLocal", par.get("dataLocal"))
    rpc = _int(where, f"{field}.parallelism.dataRPCPort", par.get("dataRPCPort"))
    if rpc is not None and rpc > 65535:
        raise KvplanError(f"{where}: {field}.parallelism.dataRPCPort {rpc} is not a port (1..65535)")
    expert = par.get("expert")
    if expert is not None and not isinstance(expert, bool):
        raise KvplanError(f"{where}: {field}.parallelism.expert must be true or false")
    template = validate.mapping(f"{where} {field}.template", ws.get("template"))
    worker = ws.get("worker")
    name = str(meta.get("name"))
    # workload_single_node.go / workload_multi_node.go: <name>-kserve[-prefill], <name>-kserve-mn[-prefill]
    wl_name = f"{name}-kserve" + ("-mn" if worker is not None else "") + ("-prefill" if role == "prefill" else "")
    if pp and worker is not None and not (dp or dpl):
        notes.append(f"{where} {field}: pipeline parallelism over a worker pod spec needs a pipeline-parallel "
                     "preset KServe does not ship in this version: not planned")
        return []
    if worker is not None and not (dp or dpl):
        notes.append(f"{where} {field}: a worker pod spec without parallelism.data matches no KServe preset: "
                     "not planned")
        return []
    if pp:
        notes.append(f"{field}.parallelism.pipeline {pp}: KServe's single-node preset does not pass it to vLLM")
    offload_notes: list[str] = []
    kv = _offload(ws, where, f"{field}.kvCacheOffloading", offload_notes)
    model, served, model_notes = meta["_model"]
    ns = str(meta.get("namespace") or "default")
    port = "8001" if role == "decode" else "8000"
    names = [served] if role == "prefill" else [served, f"publishers/{ns}/models/{served}"]
    head = ["vllm", "serve", model, "--served-model-name", *names, "--port", port]

    def launch(main: dict, tail: list[str], pod_where: str) -> tuple[list[str] | None, list[dict]]:
        env, extra = _env(main, pod_where)
        if main.get("command"):
            return None, env
        user_args = [validate.text(f"{pod_where} main args", a, scalar=True, max_len=validate.MAX_ARG)
                     for a in validate.sequence(f"{pod_where} main args", main.get("args"))]
        own_kv = any(t.startswith(("--kv-transfer-config", "--kv_transfer_config")) for t in extra + user_args)
        kv_args = ["--kv-transfer-config", kv] if kv and not own_kv else []
        return [*head, *tail, *kv_args, *extra, *user_args], env

    doc_notes = model_notes + offload_notes
    if worker is None:
        main = _main(template, f"{where} {field}.template")
        tail = ["--tensor-parallel-size", str(tp)] if tp else []
        argv, env = launch(main, tail, f"{where} {field}.template")
        pod = _pod(template, main, argv, env, SHM["single"], f"{where} {field}.template")
        return [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": wl_name},
                 "spec": {"replicas": replicas or 1, "template": {"spec": pod}}, "_notes": doc_notes}]
    worker_pod = validate.mapping(f"{where} {field}.worker", worker)
    d, dl = dp or 1, dpl or 1
    size = max(max(d, 1) // max(dl, 1), 1)  # ParallelismSpec.GetSize
    par_args = (["--enable-expert-parallel"] if expert else []) + \
        (["--tensor-parallel-size", str(tp)] if tp else []) + \
        ["--data-parallel-size", str(d), "--data-parallel-size-local", str(dl), "--data-parallel-address",
         "leader", "--data-parallel-rpc-port", str(rpc or DP_RPC_PORT)]
    pods = {}
    for part, user_pod, start, tail_extra in (("template", template, 0, []),
                                              ("worker", worker_pod, dl, ["--headless"])):
        main = _main(user_pod, f"{where} {field}.{part}")
        user_env = validate.sequence(f"{where} {field}.{part} main env", main.get("env"))
        count = next((validate.text(f"{where} env VLLM_API_SERVER_COUNT", e.get("value"), scalar=True, max_len=64)
                      for e in user_env if isinstance(e, dict) and e.get("name") == "VLLM_API_SERVER_COUNT"),
                     API_SERVER_COUNT)
        base = ["--api-server-count", count] if part == "template" else []
        tail = [*base, *par_args, "--data-parallel-start-rank", str(start), *tail_extra]
        argv, env = launch(main, tail, f"{where} {field}.{part}")
        pods[part] = _pod(user_pod, main, argv, env, SHM["data-parallel"], f"{where} {field}.{part}")
    return [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": wl_name},
             "spec": {"replicas": replicas or 1, "leaderWorkerTemplate": {
                 "size": size, "leaderTemplate": {"spec": pods["template"]},
                 "workerTemplate": {"spec": pods["worker"]}}}, "_notes": doc_notes}]


def to_kube(doc: dict, source: str, notes: list[str]) -> list[dict]:
    """The workloads KServe's controller makes of ``doc``; ``notes`` gets what is not rendered. Each document
    carries its own notes under ``_notes``."""
    meta = validate.mapping(f"{source}: {doc['kind']} metadata", doc.get("metadata"))
    name = validate.text(f"{source}: {doc['kind']} metadata.name", meta.get("name") or "llmisvc", max_len=253,
                         scalar=True)
    where = f"{source}: {doc['kind']}/{name}"
    if doc["kind"] == "LLMInferenceServiceConfig":
        notes.append(f"{where} is a preset the controller merges into services, not a workload: not planned")
        return []
    spec = validate.mapping(f"{where} spec", doc.get("spec"))
    if not spec:
        raise KvplanError(f"{where}: spec is required", "give spec.model.uri at least")
    meta = {**meta, "name": name, "_model": _model(spec, name, where)}
    if "workload" in spec:
        notes.append(f"{where}: spec.workload is not a field of the CRD (its workload fields sit directly under "
                     "spec): the API server prunes it, so its kvCacheOffloading is not applied; move it to "
                     "spec.kvCacheOffloading")
    if doc["apiVersion"].endswith("/v1alpha1"):  # its schema has no kvCacheOffloading: the API server prunes it
        for field in ("spec", "spec.prefill"):
            ws = spec if field == "spec" else spec.get("prefill")
            if isinstance(ws, dict) and ws.get("kvCacheOffloading") is not None:
                pruned = {k: v for k, v in ws.items() if k != "kvCacheOffloading"}
                spec = pruned if field == "spec" else {**spec, "prefill": pruned}
                notes.append(f"{where}: {field}.kvCacheOffloading is a v1alpha2 field; the v1alpha1 schema prunes "
                             "it (apiVersion: serving.kserve.io/v1alpha2)")
    if spec.get("baseRefs"):
        notes.append(f"{where}: spec.baseRefs (user presets merged by the controller) are not read")
    if spec.get("prefill") is None:
        return _workload(spec, meta, where, "", notes)
    prefill = validate.mapping(f"{where} spec.prefill", spec["prefill"])
    return _workload(prefill, meta, where, "prefill", notes) + _workload(spec, meta, where, "decode", notes)
