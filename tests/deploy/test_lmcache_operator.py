"""``kvplan check -f`` with the LMCache operator's ``LMCacheEngine`` (LMCache/LMCache operator/: api/v1alpha1/
lmcacheengine_types.go at 0969c80, internal/resources/compute.go at 13e20bb): a per-node LMCache server whose host
memory sits beside the engine containers of the same input. Figures from compute.go and hand arithmetic."""

from __future__ import annotations

import json

import pytest

from kvplan.deploy.loader import parse_text
from tests.conftest import run_cli

GiB = 2**30
# modelled on operator/README.md (LMCache/LMCache 9209630): "Target Only GPU Nodes" and the vLLM Deployment beside it
ENGINE = """\
apiVersion: lmcache.lmcache.ai/v1alpha1
kind: LMCacheEngine
metadata:
  name: my-cache
spec:
  nodeSelector:
    nvidia.com/gpu.present: "true"
  l1:
    sizeGB: 60
"""
VLLM = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      hostIPC: true
      containers:
        - name: vllm
          image: lmcache/vllm-openai:latest
          env:
            - {name: PYTHONHASHSEED, value: "0"}
          command: ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--gpu-memory-utilization", "0.8",
                    "--kv-transfer-config", '{"kv_connector":"LMCacheMPConnector","kv_role":"kv_both"}']
          resources:
            limits: {nvidia.com/gpu: "1", memory: 40Gi}
"""


def test_the_cache_server_is_kept_with_the_engine():
    (c,) = parse_text(ENGINE + "---\n" + VLLM, "lmc.yaml", "lmc.yaml")
    # compute.go: request ceil(60 + 5) = 65Gi, limit ceil(65 × 1.5) = ceil(97.5) = 98Gi; the node keeps the request
    assert c.node_host_bytes == 65 * GiB and c.node_host_source == "LMCacheEngine/my-cache"
    assert any("request ceil(60 + 5) = 65Gi, limit ceil(65 × 1.5) = 98Gi" in n for n in c.notes)


def test_the_nodes_memory_is_what_the_server_leaves(tmp_path):
    f = tmp_path / "lmc.yaml"
    f.write_text(ENGINE + "---\n" + VLLM)
    code, out, err = run_cli(["check", "--json", "--gpu", "h100", "--host-mem-gib", "128", "-f", str(f)])
    d = json.loads(out)
    (dep,) = d["deployments"]
    assert dep["limits"]["node_host_bytes"] == 65 * GiB
    # 128 GiB of node memory less the server's 65 GiB: 63 GiB for the engine
    assert dep["check"]["per_node"]["host_available_bytes"] == 63 * GiB
    assert any("less 65.0 GiB that LMCacheEngine/my-cache holds" in n for n in dep["notes"])


def test_resource_overrides_replace_the_operators_sizing():
    doc = ENGINE + "  resourceOverrides:\n    requests: {memory: 70Gi}\n    limits: {memory: 100Gi}\n"
    (c,) = parse_text(doc + "---\n" + VLLM, "lmc.yaml", "lmc.yaml")
    assert c.node_host_bytes == 70 * GiB


def test_a_cache_server_alone_is_no_engine(tmp_path):
    f = tmp_path / "lmc.yaml"
    f.write_text(ENGINE)
    code, out, err = run_cli(["check", "-f", str(f)])
    assert code == 2 and "no SGLang or vLLM container" in err and "LMCacheEngine/my-cache" in err


@pytest.mark.parametrize("bad, words", [
    ("l1: {sizeGB: x}", "sizeGB"),
    ("l1: {sizeGB: -1}", "sizeGB"),
    ("l1: {sizeGB: 0}", "sizeGB"),
    ("l1: {sizeGB: 1e300}", "sizeGB"),
    ("l1: {}", "sizeGB"),
    ("l1: 60", "spec.l1"),
    ("l1: {sizeGB: 1}\n  resourceOverrides: {requests: {memory: lots}}", "resourceOverrides"),
])
def test_hostile_cache_servers_are_one_line_errors(tmp_path, bad, words):
    f = tmp_path / "lmc.yaml"
    f.write_text("apiVersion: lmcache.lmcache.ai/v1alpha1\nkind: LMCacheEngine\nmetadata: {name: c}\nspec:\n"
                 f"  {bad}\n---\n{VLLM}")
    code, out, err = run_cli(["check", "-f", str(f)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert words in err, err


README_VLLM = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      hostIPC: true
      containers:
        - name: vllm
          image: lmcache/vllm-openai:latest
          command: ["/bin/sh", "-c"]
          args:
            - |
              exec python3 -m vllm.entrypoints.openai.api_server \\
                --model Qwen/Qwen2.5-7B-Instruct \\
                --port 8000 \\
                --gpu-memory-utilization 0.8 \\
                --kv-transfer-config "$(cat /etc/lmcache/kv-transfer-config.json)"
          volumeMounts:
            - {name: kv-transfer-config, mountPath: /etc/lmcache, readOnly: true}
          resources:
            limits: {nvidia.com/gpu: "1"}
      volumes:
        - name: kv-transfer-config
          configMap: {name: my-cache-connection}
"""


def test_the_operators_connection_config_map_is_read():
    # operator/README.md's vLLM pod reads the <name>-connection ConfigMap the operator creates (configmap.go)
    (c,) = parse_text(ENGINE + "---\n" + README_VLLM, "lmc.yaml", "lmc.yaml")
    kv = json.loads(c.argv[c.argv.index("--kv-transfer-config") + 1])
    assert kv == {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "lmcache.mp.host": "tcp://my-cache.default.svc.cluster.local", "lmcache.mp.port": "5555"}}
    assert any("read from ConfigMap my-cache-connection" in n for n in c.notes)


def test_a_config_map_of_the_input_is_read_and_an_unknown_one_is_not():
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: my-cache-connection}\ndata:\n" \
         "  kv-transfer-config.json: '{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'\n"
    (c,) = parse_text(cm + "---\n" + README_VLLM, "cm.yaml", "cm.yaml")
    assert json.loads(c.argv[c.argv.index("--kv-transfer-config") + 1])["kv_connector"] == "LMCacheConnectorV1"
    (alone,) = parse_text(README_VLLM, "d.yaml", "d.yaml")  # no ConfigMap: the word stays as written
    assert "$(cat /etc/lmcache/kv-transfer-config.json)" in alone.argv
