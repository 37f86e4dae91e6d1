"""``kvplan check -f`` on KServe ``LLMInferenceService`` manifests: rendered as KServe's controller and its presets
make them (kserve/kserve aaac4e2: config/llmisvcconfig/config-llm-template.yaml, config-llm-worker-data-parallel.yaml,
pkg/controller/v1alpha2/llmisvc/config_merge.go kvTransferConfig) and planned like any pod. Expected values from
those files and hand arithmetic."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvplan.deploy.loader import parse_text
from tests.conftest import SUBPROCESS_TIMEOUT_S, run_cli

GiB = 2**30
# modelled on kserve docs/samples/llmisvc/kv-cache-offloading/llm-inference-service-kv-cache-offloading.yaml, with
# kvCacheOffloading where the CRD has it (directly under spec), TP 2 and two replicas
SERVICE = """\
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata:
  name: qwen2-7b-offload
spec:
  model:
    uri: hf://Qwen/Qwen2.5-7B-Instruct
    name: Qwen/Qwen2.5-7B-Instruct
  replicas: 2
  parallelism:
    tensor: 2
  router:
    scheduler: {}
    route: {}
    gateway: {}
  template:
    containers:
      - name: main
        resources:
          limits: {cpu: '8', memory: 64Gi, nvidia.com/gpu: "2"}
          requests: {cpu: '4', memory: 32Gi, nvidia.com/gpu: "2"}
  kvCacheOffloading:
    cpu: "40Gi"
    evictionPolicy: lru
    secondary:
      - fileSystem:
          emptyDir:
            size: "100Gi"
"""


def test_the_controllers_launch_is_rendered():
    (c,) = parse_text(SERVICE, "isvc.yaml", "isvc.yaml")
    assert c.workload == "Deployment/qwen2-7b-offload-kserve" and c.name == "main"
    argv = c.argv[c.argv.index("vllm"):]
    # vllm serve /mnt/models (planned as the hf:// repository) --served-model-name <name> publishers/<ns>/models/<name>
    assert argv[:7] == ("vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--served-model-name",
                        "Qwen/Qwen2.5-7B-Instruct", "publishers/default/models/Qwen/Qwen2.5-7B-Instruct", "--port")
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    kv = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    assert kv == {"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 40 * GiB, "eviction_policy": "lru",
        "secondary_tiers": [{"type": "fs", "root_dir": "/mnt/kv-cache-0"}]}}
    assert c.replicas == 2 and c.gpus == 2 and c.nodes == 1
    assert c.memory_limit_bytes == 64 * GiB and c.memory_request_bytes == 32 * GiB
    assert c.shm_bytes == 1 * GiB  # the preset's dshm: emptyDir medium Memory, sizeLimit 1Gi
    assert c.image == "ghcr.io/llm-d/llm-d-cuda:v0.9.0" and c.env["HF_HUB_CACHE"] == "/models"
    assert any("0.22.0 or newer" in n for n in c.notes)


def test_the_offload_tier_is_planned_against_the_pods_memory_and_shm(tmp_path):
    f = tmp_path / "isvc.yaml"
    f.write_text(SERVICE)
    code, out, err = run_cli(["check", "--json", "--gpu", "h100", "--engine-version", "0.28.0", "-f", str(f)])
    d = json.loads(out)
    (dep,) = d["deployments"]
    c = dep["check"]
    # cpu_bytes_to_use 40 GiB for the engine (vLLM native CPU tier): Qwen2.5-7B at TP2 keeps 2 KV heads per rank,
    # a block = 2 (K, V) × 2 heads × 128 × 2 B × 16 tokens × 28 layers = 458,752 B per rank; a chunk holds both
    # ranks' = 917,504 B (already 4 KiB-aligned); floor(40 GiB / 917,504) = 46,811 chunks -> 42,949,279,744 B
    assert 2 * 2 * 128 * 2 * 16 * 28 == 458_752 and (40 * GiB) // 917_504 == 46_811
    assert c["per_node"]["host_kv_bytes"] == 46_811 * 917_504 == 42_949_279_744
    sev = {x["id"]: (x["severity"], x["message"]) for x in c["findings"]}
    # from 0.27 the region is one /dev/shm file: 40 GiB against the preset's 1Gi /dev/shm
    assert sev["shm-too-small"][0] == "error" and "1.00 GiB (emptyDir sizeLimit: 1Gi)" in sev["shm-too-small"][1]
    # the steady peak (40.0 GiB region + 2 worker processes + API server + EngineCore, ~45.4 GiB) is over the 32Gi
    # request and under the 64Gi limit
    assert sev["container-memory-request"][0] == "warning" and "container-memory-limit" not in sev
    assert dep["limits"]["replicas"] == 2 and code == 1 and d["verdict"] == "fail"


def test_the_docs_samples_spec_workload_is_not_a_field():
    doc = SERVICE.replace("  kvCacheOffloading:", "  workload:\n    kvCacheOffloading:").replace(
        "    cpu: \"40Gi\"", "      cpu: \"40Gi\"")
    (c,) = parse_text(doc, "isvc.yaml", "isvc.yaml")
    assert "--kv-transfer-config" not in c.argv
    assert any("spec.workload is not a field" in n and "prunes" in n for n in c.notes)


def test_v1alpha1_has_no_kv_cache_offloading():
    (c,) = parse_text(SERVICE.replace("/v1alpha2", "/v1alpha1"), "isvc.yaml", "isvc.yaml")
    assert "--kv-transfer-config" not in c.argv and c.argv[c.argv.index("--tensor-parallel-size") + 1] == "2"
    assert any("v1alpha2 field" in n for n in c.notes)


def test_a_kubectl_list_of_services():
    import yaml

    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(SERVICE)]})
    (c,) = parse_text(listed, "list.yaml", "list.yaml")
    assert c.workload == "Deployment/qwen2-7b-offload-kserve" and "--kv-transfer-config" in c.argv


def test_helm_template_output_on_stdin():
    rendered = "---\n# Source: chart/templates/svc.yaml\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n" \
               "---\napiVersion: serving.kserve.io/v1alpha2\nkind: LLMInferenceServiceConfig\nmetadata:\n" \
               "  name: kserve-config-llm-template\nspec:\n  template:\n    containers:\n    - name: main\n" \
               "      command: [/bin/bash, -c, 'exec vllm serve /mnt/models --port 8000', --]\n" \
               f"---\n# Source: chart/templates/isvc.yaml\n{SERVICE}"
    p = subprocess.run([sys.executable, "-m", "kvplan", "check", "--json", "--gpu", "h100", "-f", "-"],
                       input=rendered, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    d = json.loads(p.stdout)
    # the preset (LLMInferenceServiceConfig) is not a workload; the Service is skipped: one engine
    assert [x["workload"] for x in d["deployments"]] == ["Deployment/qwen2-7b-offload-kserve"]
    assert d["deployments"][0]["check"]["model"]["name"] == "Qwen/Qwen2.5-7B-Instruct"


def test_data_parallel_workers_are_a_leader_worker_set():
    # modelled on docs/samples/llmisvc/dp-ep/deepseek-r1-gpu-rdma-roce/llm-inference-service-dp-ep-deepseek-r1-gpu-
    # naive.yaml: data 16, dataLocal 8 -> a LeaderWorkerSet of 16 / 8 = 2 pods (ParallelismSpec.GetSize)
    doc = """\
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {name: dsc}
spec:
  model: {uri: hf://deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct}
  replicas: 1
  parallelism: {data: 16, dataLocal: 8, expert: true, tensor: 1}
  template:
    containers:
    - name: main
      env:
      - {name: VLLM_API_SERVER_COUNT, value: "1"}
      - {name: VLLM_ADDITIONAL_ARGS, value: "--gpu-memory-utilization 0.95 --max-model-len 8192 --enforce-eager"}
      resources: {limits: {memory: 512Gi, nvidia.com/gpu: "8"}}
  worker:
    containers:
    - name: main
      resources: {limits: {memory: 512Gi, nvidia.com/gpu: "8"}}
"""
    leader, worker = parse_text(doc, "dp.yaml", "dp.yaml")
    assert leader.workload == "LeaderWorkerSet/dsc-kserve-mn (leader)" and worker.workload.endswith("(worker)")
    assert leader.nodes == worker.nodes == 2 and leader.gpus == 8 and leader.shm_bytes == 8 * GiB
    la, wa = leader.argv, worker.argv
    assert la[la.index("serve") + 1] == "deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct"
    for flag, value in (("--data-parallel-size", "16"), ("--data-parallel-size-local", "8"),
                        ("--tensor-parallel-size", "1"), ("--data-parallel-start-rank", "0"),
                        ("--api-server-count", "1"), ("--max-model-len", "8192")):
        assert la[la.index(flag) + 1] == value, flag
    assert "--enable-expert-parallel" in la and "--headless" not in la
    assert "--headless" in wa and wa[wa.index("--data-parallel-start-rank") + 1] == "8"
    assert "--api-server-count" not in wa
    # served name defaults to metadata.name
    assert la[la.index("--served-model-name") + 1] == "dsc"


def test_prefill_and_decode_are_two_workloads():
    doc = SERVICE + "  prefill:\n    replicas: 3\n    parallelism: {tensor: 1}\n    template:\n      containers:\n" \
                    "      - name: main\n        resources: {limits: {memory: 48Gi, nvidia.com/gpu: '1'}}\n"
    prefill, decode = parse_text(doc, "pd.yaml", "pd.yaml")
    assert prefill.workload == "Deployment/qwen2-7b-offload-kserve-prefill" and prefill.replicas == 3
    assert prefill.argv[prefill.argv.index("--port") + 1] == "8000" and "--kv-transfer-config" not in prefill.argv
    assert decode.argv[decode.argv.index("--port") + 1] == "8001" and "--kv-transfer-config" in decode.argv


@pytest.mark.parametrize("bad, words", [
    ("replicas: many", "replicas"),
    ("replicas: [1]", "replicas"),
    ("replicas: 1e30", "replicas"),
    ("replicas: -1", "replicas"),
    ("parallelism: {tensor: 0}", "parallelism.tensor"),
    ("parallelism: {tensor: x}", "parallelism.tensor"),
    ("parallelism: {tensor: 1e308}", "parallelism.tensor"),
    ("parallelism: {data: 2.5}", "parallelism.data"),
    ("parallelism: 5", "parallelism"),
    ("parallelism: {expert: maybe}", "expert"),
    ("parallelism: {dataRPCPort: 99999}", "dataRPCPort"),
    ("kvCacheOffloading: {cpu: lots}", "kvCacheOffloading.cpu"),
    ("kvCacheOffloading: {cpu: 1e400Gi}", "kvCacheOffloading.cpu"),
    ("kvCacheOffloading: {evictionPolicy: lru}", "kvCacheOffloading.cpu"),
    ("kvCacheOffloading: {cpu: 1Gi, evictionPolicy: fifo}", "evictionPolicy"),
    ("kvCacheOffloading: [1]", "kvCacheOffloading"),
    ("template: 3", "template"),
    ("template: {containers: {name: main}}", "containers"),
    ("model: {name: x}", "spec.model.uri"),
    ("model: {uri: [hf://a/b]}", "spec.model.uri"),
    ("model: {uri: 'hf://'}", "spec.model.uri"),
    ("model: 7", "spec.model"),
])
def test_hostile_services_are_one_line_errors(tmp_path, bad, words):
    head = "apiVersion: serving.kserve.io/v1alpha2\nkind: LLMInferenceService\nmetadata: {name: x}\nspec:\n"
    model = "" if bad.startswith("model:") else "  model: {uri: hf://Qwen/Qwen2.5-7B-Instruct}\n"
    f = tmp_path / "isvc.yaml"
    f.write_text(head + model + f"  {bad}\n")
    code, out, err = run_cli(["check", "--gpu", "h100", "-f", str(f)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert words in err, err


def test_a_service_without_spec_says_so(tmp_path):
    f = tmp_path / "isvc.yaml"
    f.write_text("apiVersion: serving.kserve.io/v1alpha1\nkind: LLMInferenceService\nmetadata: {name: x}\n")
    code, out, err = run_cli(["check", "-f", str(f)])
    assert code == 2 and "spec is required" in err and len(err.strip().splitlines()) == 1
