"""What is computed once per model (models/facts.py, models/memo.py) or read once per evaluation (models/paths.py)
must be what a fresh computation gives, and must change when what it depends on changes: the config's content, a
checkpoint's files, the filesystem between two checks."""

from __future__ import annotations

import os
import stat
from dataclasses import fields, replace
from pathlib import Path

import pytest

from kvplan import check
from kvplan.errors import KvplanError
from kvplan.models import synth
from kvplan.models.catalog import catalog_entries, spec_from_catalog
from kvplan.models.config import spec_from_config
from kvplan.models.facts import model_facts
from kvplan.models.memo import Memo
from kvplan.models.paths import stat_mode, view
from kvplan.models.placement import role_of
from kvplan.models.spec import LABELS, ModelSpec
from tests.weights.test_headers import write_st

SPECS = [spec_from_catalog(e) for e in catalog_entries()]
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300,
        "max_position_embeddings": 256, "torch_dtype": "bfloat16"}


def test_identity_leaves_out_only_the_labels():
    names = {f.name for f in fields(ModelSpec)}
    spec = SPECS[0]
    assert len(spec.identity[0]) == len(names) - len(LABELS) - 1  # every field but the labels and the config
    assert spec.identity is spec.identity  # once per spec


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_synthesis_reads_no_label(spec):
    """The memo key leaves the labels out: synthesizing with other labels gives the same tensors."""
    other = replace(spec, name="x/y", notes=("z",), source="/nowhere", weight_bytes=1, weight_bytes_source="w")
    assert other.identity == spec.identity
    assert synth._synthesize(other, None) == synth._synthesize(spec, None)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_facts_are_a_fresh_walk(spec):
    out: dict[str, int] = {}
    for g in synth._synthesize(spec, {})[0]:
        part = "mtp" if g.layer is not None and g.layer >= spec.num_layers else role_of(g).group
        out[part] = out.get(part, 0) + g.one.numel * g.count
    assert spec.param_breakdown() == out
    assert spec.param_count == sum(v for k, v in out.items() if k not in ("vision", "projector", "mtp"))
    assert model_facts(spec) is model_facts(replace(spec, notes=("another label",)))


def test_a_changed_config_is_another_model():
    a = spec_from_config(dict(TINY), name="tiny")
    assert spec_from_config(dict(TINY), name="tiny") is a  # the same content: the same spec
    b = spec_from_config({**TINY, "num_hidden_layers": 3}, name="tiny")
    assert b is not a and b.identity != a.identity and b.param_count > a.param_count
    c = spec_from_config({**TINY, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
                         name="tiny")
    assert c.param_count == a.param_count and c.weight_bytes < a.weight_bytes


def test_memo_is_bounded_least_recently_used():
    m: Memo[int] = Memo("test", 2)
    calls = []
    for k in ("a", "b", "a", "c", "b"):
        m.get(k, lambda k=k: calls.append(k) or len(calls))
    assert calls == ["a", "b", "c", "b"] and len(m) == 2  # "b" dropped when "c" came ("a" was used after it)
    assert m.get(["unhashable"], lambda: 7) == 7 and m.get(None, lambda: 8) == 8


def test_a_checkpoint_estimate_follows_its_files(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps(TINY))
    st = tmp_path / "model.safetensors"
    write_st(st, {"model.embed_tokens.weight": ("BF16", [300, 64])})
    cmd = f"vllm serve {tmp_path} --kv-cache-memory-bytes 1000000"
    first = check(cmd, gpu="h100", host_mem_gib=64).plan.settings.checkpoint_weights_bytes_per_rank
    write_st(st, {"model.embed_tokens.weight": ("BF16", [300, 64]), "model.extra.weight": ("BF16", [512, 1024])})
    os.utime(st, ns=(st.stat().st_atime_ns, st.stat().st_mtime_ns + 10**9))
    second = check(cmd, gpu="h100", host_mem_gib=64).plan.settings.checkpoint_weights_bytes_per_rank
    assert second == first + 512 * 1024 * 2


def test_stat_mode_answers_as_pathlib(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "f.json").write_text("{}")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for name in ("d", "f.json", "missing", "f.json/inside", "loop", "d/"):
        p = Path(tmp_path / name)
        mode = stat_mode(p)
        assert (stat.S_ISDIR(mode), stat.S_ISREG(mode)) == (p.is_dir(), p.is_file()), name
    assert stat_mode("a\0b") == 0


def test_one_view_per_evaluation(tmp_path):
    d = tmp_path / "later"
    with view({}):
        assert stat_mode(d) == 0
        d.mkdir()
        assert stat_mode(d) == 0  # the view keeps what it saw
    assert stat.S_ISDIR(stat_mode(d))  # outside it, the filesystem as it is
    # two checks are two evaluations: a checkpoint that appears between them is seen by the second
    import json

    m = tmp_path / "model"
    cmd = f"vllm serve {m} --kv-cache-memory-bytes 1000000"
    with pytest.raises(KvplanError, match="unknown model"):
        check(cmd, gpu="h100", host_mem_gib=64)
    m.mkdir()
    (m / "config.json").write_text(json.dumps(TINY))
    assert check(cmd, gpu="h100", host_mem_gib=64).plan.per_rank.kv_tokens > 0


def test_memos_under_threads():
    """kvplan serve plans in a thread pool: a small memo hammered from threads never fails, and checks made from
    threads equal the same checks made one after another."""
    from concurrent.futures import ThreadPoolExecutor

    m: Memo[int] = Memo("threads", 3)
    with ThreadPoolExecutor(8) as pool:
        out = list(pool.map(lambda i: m.get(i % 7, lambda: i % 7), range(5000)))
    assert out == [i % 7 for i in range(5000)] and len(m) <= 3
    launches = [("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2", "0.5.23"),
                ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8", "0.5.9"),
                ("vllm serve Qwen/Qwen3-32B -tp 2 --kv-offloading-size 64", "0.27.0"),
                ("vllm serve moonshotai/Kimi-K2.5 -tp 8", "0.33.0")] * 6
    one_by_one = [check(c, gpu="h200", host_mem_gib=1024, engine_version=v).to_dict() for c, v in launches]
    with ThreadPoolExecutor(6) as pool:
        threaded = list(pool.map(lambda cv: check(cv[0], gpu="h200", host_mem_gib=1024,
                                                  engine_version=cv[1]).to_dict(), launches))
    assert threaded == one_by_one
