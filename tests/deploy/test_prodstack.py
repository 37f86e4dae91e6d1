"""``kvplan check -f values.yaml`` on vLLM production-stack Helm values: each ``modelSpec`` rendered into the
Deployment the chart makes (helm/templates/deployment-vllm-multi.yaml at production-stack 010004e) and planned like
any pod. Expected values from the chart's template and hand arithmetic."""

from __future__ import annotations

import json

import pytest

from kvplan.deploy.loader import parse_text
from tests.conftest import run_cli

GiB = 2**30
VALUES = """\
servingEngineSpec:
  runtimeClassName: ""
  modelSpec:
  - name: "llama3"
    repository: "lmcache/vllm-openai"
    tag: "latest"
    modelURL: "meta-llama/Llama-3.1-8B-Instruct"
    replicaCount: 2
    requestCPU: 6
    requestMemory: "32Gi"
    requestGPU: 1
    vllmConfig:
      enablePrefixCaching: true
      maxModelLen: 16384
      dtype: "bfloat16"
      extraArgs: ["--gpu-memory-utilization", "0.8"]
    lmcacheConfig:
      enabled: true
      cpuOffloadingBufferSize: "60"
  - name: "qwen-tp2"
    repository: "vllm/vllm-openai"
    tag: "v0.11.0"
    modelURL: "Qwen/Qwen3-32B"
    requestCPU: 8
    requestMemory: "120Gi"
    limitMemory: "100Gi"
    requestGPU: 2
    vllmConfig:
      tensorParallelSize: 2
      maxModelLen: 32768
      v0: 1
    lmcacheConfig:
      enabled: true
      cpuOffloadingBufferSize: "40"
  - name: "big"
    modelURL: "deepseek-ai/DeepSeek-V3"
    requestGPU: 8
    raySpec:
      headNode: {requestCPU: 4}
"""


def test_the_chart_renders_each_model_spec():
    cs = parse_text(VALUES, "values.yaml", "values.yaml")
    assert [c.workload for c in cs] == ["Deployment/llama3-deployment-vllm", "Deployment/qwen-tp2-deployment-vllm"]
    a, b = cs
    # the chart's command: vllm serve <modelURL> --host 0.0.0.0 --port 8000, vllmConfig's flags, extraArgs, then the
    # LMCache connector; the LMCache buffer as env (LMCACHE_MAX_LOCAL_CPU_SIZE, GiB per rank)
    assert a.argv[a.argv.index("vllm"):][:7] == ("vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--host",
                                                  "0.0.0.0", "--port", "8000")
    assert "--enable-prefix-caching" in a.argv and "--max-model-len" in a.argv and "0.8" in a.argv
    assert json.loads(a.argv[a.argv.index("--kv-transfer-config") + 1])["kv_connector"] == "LMCacheConnectorV1"
    assert a.env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "60" and a.env["LMCACHE_LOCAL_CPU"] == "True"
    assert a.replicas == 2 and a.gpus == 1 and a.image == "lmcache/vllm-openai:latest"
    assert a.memory_request_bytes == 32 * GiB and a.memory_limit_bytes is None
    assert a.shm_bytes == 64 * 2**20  # no tensorParallelSize: no /dev/shm volume, the runtime's 64 MB
    # tensorParallelSize mounts a 20Gi memory emptyDir at /dev/shm; v0: the V0 connector and VLLM_USE_V1=0
    assert b.shm_bytes == 20 * GiB and "--no-enable-prefix-caching" in b.argv
    assert ("--tensor-parallel-size", "2") == tuple(b.argv[b.argv.index("--tensor-parallel-size"):][:2])
    assert json.loads(b.argv[b.argv.index("--kv-transfer-config") + 1])["kv_connector"] == "LMCacheConnector"
    assert b.env["VLLM_USE_V1"] == "0" and b.memory_limit_bytes == 100 * GiB and b.gpus == 2
    assert b.engine_version == "0.11.0"


def test_lmcache_buffer_is_planned_and_flagged_against_the_pods_memory(tmp_path):
    f = tmp_path / "values.yaml"
    f.write_text(VALUES)
    code, out, err = run_cli(["check", "--json", "--gpu", "h100", "--engine-version", "0.11.0", "-f", str(f)])
    d = json.loads(out)
    llama, qwen = d["deployments"]
    c = llama["check"]
    # LMCache pins its local CPU buffer rounded up to a power of two: 60 GiB -> 64 GiB, on the node's one rank
    assert c["per_node"]["host_kv_bytes"] == 64 * GiB
    assert c["per_node"]["container_request_bytes"] == 32 * GiB
    req = next(x for x in c["findings"] if x["id"] == "container-memory-request")
    # the host ledger's steady peak: 64 GiB pinned + the rank's process (1.96 GiB torch + CUDA floor, pytorch#113326,
    # + 0.28 GiB of the engine's imports) + the API server 0.47 GiB = 66.7 GiB > the 32 GiB request
    assert 64 + 1.96 + 0.28 + 0.47 < 66.75
    assert req["severity"] == "warning" and "steady peak 66.7 GiB" in req["message"] and "32.0 GiB" in req["message"]
    assert "LMCache CPU pool 64.0 GiB" in req["message"]
    # TP2 with a 100Gi limit: 2 ranks × 40 GiB -> 64 GiB each (power of two) = 128 GiB pinned > 100 GiB: OOM-kill
    q = qwen["check"]
    assert q["per_node"]["host_kv_bytes"] == 2 * 64 * GiB
    ids = {x["id"]: x["severity"] for x in q["findings"]}
    assert ids.get("container-memory-limit") == "error" and "container-memory-request" not in ids
    assert code == 1 and d["verdict"] == "fail"


def test_values_without_an_engine_say_so(tmp_path):
    f = tmp_path / "values.yaml"
    f.write_text("servingEngineSpec:\n  modelSpec:\n  - name: big\n    modelURL: m\n    raySpec: {}\n")
    code, out, err = run_cli(["check", "-f", str(f)])
    assert code == 2 and "no SGLang or vLLM container" in err and "raySpec" in err


@pytest.mark.parametrize("bad", ["modelURL: [1, 2]", "vllmConfig: 3", "lmcacheConfig: {cpuOffloadingBufferSize: x}"])
def test_bad_values_are_one_line(tmp_path, bad):
    f = tmp_path / "values.yaml"
    f.write_text(f"servingEngineSpec:\n  modelSpec:\n  - name: a\n    {bad}\n")
    code, out, err = run_cli(["check", "-f", str(f)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
