"""kvplan explain on real logs (../shared/logcorpus) and on bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "logcorpus"
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


def test_fidelity_harness_no_regression():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fidelity

    rows = fidelity.run(CORPUS)
    baseline = json.loads((ROOT / "tests" / "data" / "fidelity_baseline.json").read_text())
    by_id = {r["id"]: r for r in rows}
    for case_id, err in baseline.items():
        r = by_id[case_id]
        assert r["error_pct"] is not None and not r.get("estimated"), (case_id, r["reason"])
        assert abs(r["error_pct"]) <= abs(err) + 0.01, (case_id, r["error_pct"], err)
    assert fidelity.summary(rows).startswith(f"fidelity: {len(rows)} cases")
