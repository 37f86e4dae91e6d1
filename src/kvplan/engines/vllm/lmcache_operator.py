"""The LMCache Kubernetes operator's ``LMCacheEngine`` (``lmcache.lmcache.ai/v1alpha1``): one LMCache multiprocess
server per selected node, which vLLM pods reach through ``LMCacheMPConnector``; its host memory sits on the node
beside the engines, outside their containers (``Engine.node_servers``; kvplan.deploy keeps it with each engine
container of the same input).

Read in LMCache/LMCache ``operator/`` (the operator lives in the LMCache repository; there is no separate
``lmcache-operator`` repository):

* ``api/v1alpha1/lmcacheengine_types.go`` (commit 0969c80de9bf2a15fe2f5c808086995baa796d3a): ``spec.l1.sizeGB``
  (float64, required, > 0), ``spec.nodeSelector``, ``spec.resourceOverrides`` (a ResourceRequirements);
  https://github.com/LMCache/LMCache/blob/0969c80de9bf2a15fe2f5c808086995baa796d3a/operator/api/v1alpha1/lmcacheengine_types.go
* ``internal/resources/compute.go`` (commit 13e20bb718ed58ee40a930f308c267ae774c8875): the server runs with
  ``--l1-size-gb <sizeGB>``; without overrides the pod requests ``ceil(sizeGB + 5)`` Gi and is limited to
  ``ceil(request × 1.5)`` Gi;
  https://github.com/LMCache/LMCache/blob/13e20bb718ed58ee40a930f308c267ae774c8875/operator/internal/resources/compute.go
* ``internal/resources/daemonset.go`` (commit 92096307fff0366d10369ff5bdfef1a8c6d7bdea): a DaemonSet running
  ``python3 -m lmcache.v1.multiprocess.server`` with ``hostIPC: true`` on every node ``nodeSelector`` picks.
* ``internal/resources/configmap.go`` (commit 8b734a6e52600f6a883f61c4fee7946fd8bbef27): the ``<name>-connection``
  ConfigMap, key ``kv-transfer-config.json``: ``{"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
  "kv_connector_extra_config": {"lmcache.mp.host": "tcp://<name>.<namespace>.svc.cluster.local",
  "lmcache.mp.port": "<port>"}}`` (the operator README's vLLM pods read it with ``$(cat ...)``).
* LMCache ``lmcache/v1/distributed/config.py`` ``parse_args_to_config``: ``size_in_bytes = int(l1_size_gb *
  (1 << 30))`` (GiB), the L1 memory manager's pinned CPU pool, grown lazily up to that size.
"""

from __future__ import annotations

import json
import math
from typing import Any

from kvplan import validate
from kvplan.errors import KvplanError
from kvplan.units import GiB

NAME = "LMCache operator LMCacheEngine"
OVERHEAD_GI = 5  # compute.go: memoryRequest = ceil(l1.sizeGB + 5) Gi
LIMIT_FACTOR = 1.5  # compute.go: memoryLimit = ceil(memoryRequest * 1.5) Gi


def is_engine(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == "LMCacheEngine" \
        and isinstance(doc.get("apiVersion"), str) and doc["apiVersion"].startswith("lmcache.lmcache.ai/")


def node_server(doc: dict, source: str) -> tuple[str, int, str, dict[str, dict[str, str]]]:
    """(its name, the host bytes it holds on each node it runs on: its pod's memory request, at least its L1 pool;
    a note with the figures; the connection ConfigMap the operator creates)."""
    from kvplan.quantity import k8s_bytes

    meta = validate.mapping(f"{source}: LMCacheEngine metadata", doc.get("metadata"))
    name = validate.text(f"{source}: LMCacheEngine metadata.name", meta.get("name") or "lmcache", max_len=253,
                         scalar=True)
    where = f"{source}: LMCacheEngine/{name}"
    spec = validate.mapping(f"{where} spec", doc.get("spec"))
    l1 = validate.mapping(f"{where} spec.l1", spec.get("l1"))
    if l1.get("sizeGB") is None:
        raise KvplanError(f"{where}: spec.l1.sizeGB is required (the CRD requires it)", "e.g. spec.l1.sizeGB: 60")
    size = validate.gib(f"{where} spec.l1.sizeGB", l1["sizeGB"], positive=True, hint="GiB of L1 cache, e.g. 60")
    l1_bytes = int(size * GiB)
    over = validate.mapping(f"{where} spec.resourceOverrides", spec.get("resourceOverrides"))
    if over:
        lim = validate.mapping(f"{where} resourceOverrides.limits", over.get("limits")).get("memory")
        req = validate.mapping(f"{where} resourceOverrides.requests", over.get("requests")).get("memory")
        if lim is not None:
            k8s_bytes(lim, f"{where} resourceOverrides.limits.memory")  # validated; the request is what is kept
        request = k8s_bytes(req, f"{where} resourceOverrides.requests.memory") if req is not None else None
        pod = f"resourceOverrides: request {req}, limit {lim}"
    else:
        req_gi = math.ceil(size + OVERHEAD_GI)
        lim_gi = math.ceil(req_gi * LIMIT_FACTOR)
        request = req_gi * GiB
        pod = f"the operator's sizing: request ceil({size:g} + 5) = {req_gi}Gi, limit ceil({req_gi} × 1.5) = " \
              f"{lim_gi}Gi"
    held = max(l1_bytes, request or 0)  # what the scheduler keeps for it, at least its L1 pool
    sel = spec.get("nodeSelector")
    nodes = "every node" if not sel else f"the nodes of nodeSelector {sel!r}"[:200]
    note = (f"LMCacheEngine/{name} runs an LMCache server on {nodes} (a DaemonSet, hostIPC): L1 {size:g} GiB of "
            f"pinned host memory (--l1-size-gb, grown lazily), pod {pod}: {held / GiB:,.1f} GiB of the node "
            "beside this engine, outside its container")
    server = validate.mapping(f"{where} spec.server", spec.get("server"))
    port = validate.count(f"{where} spec.server.port", server.get("port", 5555), 1024, 65535)
    ns = validate.text(f"{where} metadata.namespace", meta.get("namespace") or "default", max_len=253, scalar=True)
    connection = json.dumps({"kv_connector": "LMCacheMPConnector", "kv_connector_extra_config": {
        "lmcache.mp.host": f"tcp://{name}.{ns}.svc.cluster.local", "lmcache.mp.port": str(port)},
        "kv_role": "kv_both"}, indent=2)  # Go's MarshalIndent: sorted keys, two spaces
    return f"LMCacheEngine/{name}", held, note, {f"{name}-connection": {"kv-transfer-config.json": connection}}
