"""A third engine is one package plus one registry line: tests/fake_engine ("toyllm"), registered at test time, plans
(check, the CLI's JSON, findings, the suggested command), explains its startup log and is diagnosed from its serving
log through the same public paths as SGLang and vLLM, without a line of kvplan outside its package knowing it.

toyllm's KV pool is exactly ``--kv-gib`` GiB per rank in bf16. Qwen/Qwen3-8B's config.json (36 layers, 8 KV heads,
head_dim 128, max_position_embeddings 40,960) gives by hand: cell = 2 (K, V) × 8 × 128 × 36 × 2 B = 147,456 B per
token; --kv-gib 2 -> 2^31 / 147,456 = 14,563.5 -> 14,563 tokens -> 14,560 in whole blocks of 16 (910 blocks);
--kv-gib 4 -> 29,127.1 -> 29,120 tokens.
"""

from __future__ import annotations

import json

import pytest

from kvplan import KvplanError, check
from kvplan.diagnose.run import diagnose
from kvplan.explain import explain

CMD = ["toyllm", "serve", "Qwen/Qwen3-8B", "--kv-gib", "2"]
HW = {"gpu": "h100", "host_mem_gib": 64.0}
TOKENS_2GIB, TOKENS_4GIB, CONTEXT = 14_560, 29_120, 40_960


@pytest.fixture
def toyllm(monkeypatch):
    from kvplan.engines import ENGINES

    monkeypatch.setitem(ENGINES, "toyllm", "tests.fake_engine.engine:ENGINE")


def _log(tmp_path, stats: int = 0) -> str:
    lines = ["toyllm 1.2.0 starting", "toyllm args: model=Qwen/Qwen3-8B kv_gib=2 block_size=16",
             f"toyllm kv pool: {TOKENS_2GIB} tokens", "some other program's line"]
    lines += ["toyllm stats: running=8 waiting=12 usage=0.97 gen_tps=400.0"] * stats
    p = tmp_path / "toyllm.log"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_unknown_until_registered():
    with pytest.raises(KvplanError, match="not a known engine launch command"):
        check(CMD, **HW)


def test_plans_with_findings_and_a_fixed_command(toyllm):
    r = check(CMD, **HW)
    assert r.plan.engine == "toyllm" and r.plan.per_rank.kv_bytes_per_token == 147_456
    assert r.plan.per_rank.kv_tokens == TOKENS_2GIB and r.plan.per_rank.kv_blocks == TOKENS_2GIB // 16
    assert [(f.id, f.severity) for f in r.findings] == [("toy-pool-below-context", "warning")]
    assert f"{TOKENS_4GIB:,}" in r.findings[0].fix  # the what-if is a re-planned launch
    assert r.suggested_command == "toyllm serve Qwen/Qwen3-8B --kv-gib 4"
    assert r.suggested_plan is not None and r.suggested_plan.per_rank.kv_tokens == TOKENS_4GIB
    assert r.exit_code == 0 and r.verdict == "warn"


def test_cli_json_with_generic_findings(toyllm, capsys):
    from kvplan.cli.main import main

    code = main(["check", "--json", "--gpu", "h100", "--host-mem-gib", "64", "--", *CMD, "--kv-gib", "8",
                 "--bogus-flag", "1"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["engine"] == "toyllm" and d["settings"]["kv_gib"] == 8.0
    assert d["per_rank"]["kv_tokens"] == 2**33 // 147_456 // 16 * 16  # 58,254.2 -> 58,240 (above the context)
    assert [f["id"] for f in d["findings"]] == ["unknown-flags"] and "--bogus-flag" in d["findings"][0]["message"]


def test_explains_its_startup_log(toyllm, tmp_path):
    res = explain(_log(tmp_path), **HW)
    assert res.engine == "toyllm" and res.engine_version == "1.2.0" and res.version_source == "printed in the log"
    assert res.command == "toyllm serve Qwen/Qwen3-8B --kv-gib 2 --block-size 16"
    [c] = res.comparisons
    assert (c.field, c.observed, c.predicted, c.ok) == ("kv_tokens", TOKENS_2GIB, TOKENS_2GIB, True)
    d = res.to_dict()
    assert d["observed"]["kv_tokens"] == d["predicted"]["kv_tokens"] == TOKENS_2GIB


def test_diagnosed_from_its_serving_log(toyllm, tmp_path):
    res = diagnose(log=_log(tmp_path, stats=10), **HW)
    assert res.engine == "toyllm" and res.bottleneck == "kv-capacity"
    assert res.observed["pool_tokens"] == TOKENS_2GIB and res.observed["pool_source"] == "the log"
    assert [lv.name for lv in res.levers] == ["current", "KV ×2"]
    cur, more = res.levers
    assert cur.kv_tokens == TOKENS_2GIB and more.kv_tokens == TOKENS_4GIB  # anchored: observed + plan delta
    assert more.command == "toyllm serve Qwen/Qwen3-8B --kv-gib 4 --block-size 16"
    assert res.observed["max_running"] == 64  # the running cap the engine reports for the launch
