"""``kvplan serve``'s API: /api/plan returns what ``kvplan check --json`` prints for the same inputs, sliders are
flags of the effective command, bad input is the CLI's one line with HTTP 400, and the guards (host, origin, JSON
only, bounded body, no path read) hold.

The tests named ``consistency`` compare the server with the CLI run as a user runs it: they prove the two front doors
give one answer, not that the answer is right (the plan's figures are checked against engines, real logs and hand
arithmetic in tests/sglang, tests/vllm, tests/integration and the golden records)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import INCIDENT_CMD, INCIDENT_HW, run_cli
from tests.html.serve_helpers import request, running_server

GPU = INCIDENT_HW[1]
INCIDENT = {"command": shlex.join(INCIDENT_CMD), "gpu": GPU, "host_mem_gib": 449, "engine_version": "0.5.9"}


@pytest.fixture(scope="module")
def url():
    with running_server() as u:
        yield u


def cli_json(cmd: list[str], *hw: str) -> dict:
    code, out, err = run_cli(["check", *hw, "--json", "--", *cmd])
    assert out.strip(), err
    return json.loads(out)


def test_consistency_api_plan_is_check_json(url):
    status, d, hdrs = request(url + "/api/plan", INCIDENT)
    assert status == 200 and hdrs["Content-Type"] == "application/json"
    assert d == cli_json(INCIDENT_CMD, *INCIDENT_HW)


def test_sliders_are_the_flags_of_the_effective_command(url):
    body = {**INCIDENT, "set": {"fraction": 0.88, "host_kv": 47, "tp": 8}}
    status, d, _ = request(url + "/api/plan", body)
    assert status == 200
    assert "--mem-fraction-static 0.88" in d["command"] and "--hicache-size 47" in d["command"]
    assert "--tp 8" in d["command"]  # the user's alias is kept in place
    assert d == cli_json(shlex.split(d["command"]), *INCIDENT_HW)
    # 0.85 -> 0.88 adds 3 % of P at 70,272 B per token ((512 + 64) x 61 layers x 2 B, MLA)
    lo = request(url + "/api/plan", {**INCIDENT, "set": {"fraction": 0.85}})[1]["per_rank"]
    p = lo["baseline_free_bytes"]
    assert abs(d["per_rank"]["kv_tokens"] - lo["kv_tokens"] - 0.03 * p / ((512 + 64) * 61 * 2)) <= 2


def test_consistency_vllm_command_and_its_sliders(url):
    cmd = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "-tp", "2"]
    body = {"command": shlex.join(cmd), "gpu": "h100", "host_mem_gib": 1024, "engine_version": "0.27.0",
            "set": {"fraction": 0.85, "fp8_kv": True, "max_running": 128, "host_kv": 64}}
    status, d, _ = request(url + "/api/plan", body)
    assert status == 200, d
    for flag in ("--gpu-memory-utilization 0.85", "--kv-cache-dtype fp8", "--max-num-seqs 128",
                 "--kv-offloading-size 64"):
        assert flag in d["command"]
    assert d == cli_json(shlex.split(d["command"]), "--gpu", "h100", "--host-mem-gib", "1024", "--engine-version",
                         "0.27.0")


def test_consistency_view_returns_the_plan_and_its_charts(url):
    status, j, _ = request(url + "/api/view", INCIDENT)
    assert status == 200 and set(j) == {"plan", "html", "sliders"}
    assert j["plan"] == cli_json(INCIDENT_CMD, *INCIDENT_HW)  # the same plan as the CLI's, figure for figure
    assert 'id="gpu-chart"' in j["html"] and "2.40 TB (2,235 GiB)" in j["html"]


def test_pasted_config(url):
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192,
           "torch_dtype": "bfloat16"}
    body = {"command": "python -m sglang.launch_server --model-path my-org/private-model --tp 2", "gpu": "h100",
            "host_mem_gib": 1024, "engine_version": "0.5.9", "model_config": json.dumps(cfg)}
    status, d, _ = request(url + "/api/plan", body)
    assert status == 200, d
    assert d["per_rank"]["kv_bytes_per_token"] == 2 * (8 // 2) * 128 * 32 * 2  # K+V, 4 heads/rank, 32 layers, bf16
    assert d["model"]["source"] == "pasted config.json"


@pytest.mark.parametrize("cli_args, body", [
    (["check", "--gpu", "h100", "--json", "--", "python", "-m", "sglang.launch_server"],
     {"command": "python -m sglang.launch_server", "gpu": "h100"}),
    (["check", "--gpu", "no-such-gpu", "--json", "--", *INCIDENT_CMD], {**INCIDENT, "gpu": "no-such-gpu"}),
    (["check", *INCIDENT_HW, "--json", "--", "python", "-m", "sglang.launch_server", "--model-path",
      "moonshotai/Kimi-K2.5", "--tp", "8", "--mem-fraction-static", "1.5"],
     {**INCIDENT, "command": "python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 "
                             "--mem-fraction-static 1.5"}),
    (["check", "--json", "--", "ls", "-la"], {"command": "ls -la"}),
])
def test_bad_input_is_the_clis_one_line(url, cli_args, body):
    code, out, err = run_cli(cli_args)
    assert code == 2 and err.startswith("kvplan: error: ") and len(err.strip().splitlines()) == 1
    status, j, _ = request(url + "/api/plan", body)
    assert status == 400 and j == {"error": err.strip().removeprefix("kvplan: error: ")}


def test_a_value_the_engine_refuses_is_planned_like_check(url):
    """SGLang's argparse refuses --mem-fraction-static x (type=float): check plans the defaults with a flag-bad-value
    error (exit 1), and the page's guard must not stop at the same parse error before check runs."""
    i = INCIDENT_CMD.index("--mem-fraction-static") + 1
    cmd = [*INCIDENT_CMD[:i], "x", *INCIDENT_CMD[i + 1:]]
    code, out, _ = run_cli(["check", *INCIDENT_HW, "--json", "--", *cmd])
    assert code == 1 and "flag-bad-value" in [f["id"] for f in json.loads(out)["findings"]]
    status, d, _ = request(url + "/api/plan", {**INCIDENT, "command": shlex.join(cmd)})
    assert status == 200 and d == json.loads(out)


@pytest.mark.parametrize("body, needle", [
    ({"command": "python -m sglang.launch_server --model-path /etc"}, "catalog"),
    ({"command": "python -m sglang.launch_server --model-path ../../etc"}, "catalog"),
    ({"command": "python -m sglang.launch_server --model-path ~/.ssh"}, "catalog"),
    ({"command": "/opt/venv/bin/vllm serve Qwen/Qwen3-8B"}, "bare program name"),
    ({"command": "x", "model_config": "{oops"}, "malformed JSON"),
    ({"command": "x", "tp": 2}, "unknown field(s): tp"),
    ({**INCIDENT, "set": {"fraction": 1.5}}, "fraction must be between"),
    ({**INCIDENT, "set": {"tp": "8"}}, "tp must be an integer"),
    ({**INCIDENT, "set": {"warp": 9}}, "unknown slider(s): warp"),
    ({**INCIDENT, "host_mem_gib": True}, "host_mem_gib must be a number"),
    ({**INCIDENT, "engine_version": "$(rm -rf /)"}, "is not a version"),
    ({"command": "y" * 9000}, "over 8192 characters"),
    ([1, 2], "must be a JSON object"),
])
def test_guards(url, body, needle):
    status, j, _ = request(url + "/api/plan", body)
    assert status == 400 and needle in j["error"] and "\n" not in j["error"]


def test_body_limit(url):
    import asyncio
    import http.client
    from urllib.parse import urlsplit

    from kvplan.serve.app import MAX_BODY, BadRequest, _read_json

    conn = http.client.HTTPConnection(urlsplit(url).netloc, timeout=600)
    conn.request("POST", "/api/plan", body=b"{}", headers={"Content-Type": "application/json",
                                                            "Content-Length": str(MAX_BODY + 1)})
    r = conn.getresponse()
    assert r.status == 413 and json.loads(r.read()) == {"error": "the request is over 512 KiB"}
    conn.close()

    class Streamed:  # a chunked body without Content-Length: counted as it arrives
        headers = {"content-type": "application/json"}

        async def stream(self):
            for _ in range(MAX_BODY // 65536 + 2):
                yield b" " * 65536

    # a fresh thread: another test's Playwright (sync API) may leave an event loop running in this one
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as pool, pytest.raises(BadRequest) as e:
        pool.submit(asyncio.run, _read_json(Streamed())).result(timeout=600)
    assert e.value.status == 413


def test_transport_guards(url):
    assert request(url + "/api/plan", raw=b"command=x", headers={"Content-Type": "text/plain"})[0] == 415
    assert request(url + "/api/plan", raw=b"{nope")[0] == 400
    status, j, _ = request(url + "/api/plan", INCIDENT, headers={"Origin": "http://evil.example"})
    assert status == 403 and j == {"error": "requests come from the kvplan page only"}
    assert request(url + "/api/plan", INCIDENT, headers={"Origin": url})[0] == 200
    assert request(url + "/", headers={"Host": "evil.example"})[0] == 400  # DNS rebinding
    assert request(url + "/api/plan")[0] == 405
    assert request(url + "/assets/..%2f..%2fapp.py")[0] == 404
    status, page, hdrs = request(url + "/")
    assert status == 200 and "default-src 'none'" in hdrs["Content-Security-Policy"]
    assert 'id="fraction"' in page and "NVIDIA RTX PRO 6000 Blackwell Server Edition" in page


def test_serve_refuses_other_bind_addresses():
    for host in ("0.0.0.0", "::", "192.168.1.10", "localhost"):
        code, out, err = run_cli(["serve", "--host", host, "--port", "0"])
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert err.startswith(f"kvplan: error: kvplan serve binds 127.0.0.1 only, not '{host}'")


def test_hicache_off_and_dp_attention_sliders(url):
    status, d, _ = request(url + "/api/plan", {**INCIDENT, "set": {"host_kv": 0, "dp": 8, "dp_attention": True}})
    assert status == 200, d
    assert "--hicache-size" not in d["command"] and "--enable-hierarchical-cache" not in d["command"]
    assert "--enable-dp-attention" in d["command"] and "--dp-size 8" in d["command"]
    assert d["per_node"]["host_kv_bytes"] == 0 and "host-oversubscribed" not in [f["id"] for f in d["findings"]]
    assert d["per_replica"]["dp_groups"] == 8  # 8 DP-attention groups, each its own KV pool
    assert d == cli_json(shlex.split(d["command"]), *INCIDENT_HW)
    status, j, _ = request(url + "/api/plan", {"command": "vllm serve Qwen/Qwen3-8B", "gpu": "h100",
                                               "set": {"dp_attention": True}})
    assert status == 400 and "vLLM has no DP-attention" in j["error"]


def test_hostile_bodies_are_one_line_400(url):
    # issue #22: a 5,000-digit integer in a pasted config.json was HTTP 500 (ValueError); deep nesting, huge numbers
    cfg = json.loads((Path(__file__).resolve().parents[1] / "data" / "llama31_8b_config.json").read_text())
    cfg["num_hidden_layers"] = 32
    text = json.dumps(cfg).replace('"num_hidden_layers": 32', '"num_hidden_layers": ' + "9" * 5000)
    body = {"command": "python -m sglang.launch_server --model-path my-org/m", "gpu": "h100", "model_config": text}
    status, d, _ = request(url + "/api/plan", body)
    assert status == 400 and "a number of 5,000 digits" in d["error"], d
    for raw, words in ((b'{"command": "vllm serve Qwen/Qwen3-8B", "host_mem_gib": ' + b"9" * 5000 + b"}",
                        "a number of 5,000 digits"),
                       (b'{"command": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested more than 64 levels"),
                       (b'{"command": ' + b"[" * 200 + b"]" * 200 + b"}", "nested more than 64 levels")):
        status, d, _ = request(url + "/api/plan", raw=raw)
        assert status == 400 and words in d["error"] and "\n" not in d["error"], d
