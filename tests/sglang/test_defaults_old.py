"""SGLang 0.3.0 .. 0.4.3.post4: defaults and the request pool, against the wheels' source and real logs.

Expected values are read from each wheel's ``server_args.py::ServerArgs.__post_init__`` (tp table, 25,000 MiB
small-GPU branch), ``model_runner.py::ModelRunner.init_memory_pool`` and ``tp_worker.py`` (request pool), or
taken from real logs in ../shared/logcorpus; the arithmetic is written out per case.
"""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.engines.sglang.defaults import DefaultsInput, resolve_defaults
from kvplan.errors import KvplanError

GiB = 2**30
SGL = ["python", "-m", "sglang.launch_server", "--model-path"]
RTX4090, A40, H100, MI300X = 24564, 46068, 81559, 196592


def res(version, gpu, **kw):
    return resolve_defaults(DefaultsInput(version, gpu, **kw))


# --- mem_fraction_static: tp table only; the TP8 entry moved 0.83 -> 0.82 (0.3.6) -> 0.81 (0.4.0)


@pytest.mark.parametrize("version, tp8", [("0.3.0", 0.83), ("0.3.5.post2", 0.83), ("0.3.6", 0.82),
                                          ("0.3.6.post3", 0.82), ("0.4.0", 0.81), ("0.4.3.post4", 0.81)])
def test_tp_table(version, tp8):
    assert res(version, H100, tp=1).mem_fraction_static == 0.88
    assert res(version, H100, tp=2).mem_fraction_static == 0.87
    assert res(version, H100, tp=4).mem_fraction_static == 0.85
    assert res(version, H100, tp=8).mem_fraction_static == tp8
    assert res(version, H100, tp=16).mem_fraction_static == 0.79
    # no GPU-size term before 0.4.5.post3: a B200-size card gets the same table
    assert res(version, 183359, tp=1).mem_fraction_static == 0.88


def test_vlm_factor_only_from_035():
    # 0.3.0-0.3.4.post2: ModelRunner copied mem_fraction_static, then scaled server_args -> no effect on the KV
    assert res("0.3.4.post2", H100, is_multimodal=True).mem_fraction_static == 0.88
    # 0.3.5+: self.mem_fraction_static *= 0.95 -> 0.88 × 0.95 = 0.836
    assert res("0.3.5", H100, is_multimodal=True).mem_fraction_static == pytest.approx(0.836)
    assert res("0.4.3", H100, tp=8, is_multimodal=True).mem_fraction_static == pytest.approx(0.81 * 0.95)


def test_chunked_prefill_and_graph_bs():
    # <0.3.5.post2: field default 8192 and capture list max 160 regardless of the GPU
    r = res("0.3.5", RTX4090)
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs) == (8192, 160)
    # 0.3.5.post2-0.3.6.post3: < 25,000 MiB -> chunk //= 4 (8192 -> 2048), cuda_graph_max_bs = 4
    r = res("0.3.5.post2", RTX4090)
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs) == (2048, 4)
    assert res("0.3.6.post3", RTX4090, chunked_prefill_size=4096).chunked_prefill_size == 1024  # explicit too
    # 0.4.0: 2048 / 8 below 25,000 MiB; 0.4.0.post1+: TP>=4 gets 80
    r = res("0.4.0", RTX4090, tp=4)
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs) == (2048, 8)
    assert res("0.4.0.post1", RTX4090, tp=4).cuda_graph_max_bs == 80
    assert res("0.4.0.post1", RTX4090, tp=2).cuda_graph_max_bs == 8
    r = res("0.4.2", A40, tp=4)
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs) == (8192, 160)
    # DP attention (0.3.6+): chunk // 2; max bs min(., 96) until 0.4.0.post2
    r = res("0.3.6", H100, tp=8, dp=8, enable_dp_attention=True)
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs) == (4096, 96)
    assert res("0.4.1", H100, tp=8, dp=8, enable_dp_attention=True).cuda_graph_max_bs == 160


def test_explicit_graph_bs_picks_the_largest_capture_size_below():
    # capture list [1, 2, 4, 8, 16, ..., 160]: cap 100 -> 96
    assert res("0.4.1", H100, cuda_graph_max_bs=100).cuda_graph_max_bs == 96


# --- the request pool (req_pool.py) and full plans against real logs


def plan(model, *flags, version, **opts):
    opts.setdefault("host_mem_gib", 1000)
    return check([*SGL, model, *flags], engine_version=version, **opts)


def test_docs_v041_llama31_8b_h100():
    # docs.sglang.ai notebook (logcorpus sglang-docs-llama31-8b-80gb-v041): "Load weight begin. avail mem=78.81 GB",
    # "Load weight end ... avail mem=63.72 GB", "max_total_num_tokens=444500, ..., max_running_requests=2049,
    # context_len=131072". rest = 63.72 - 78.81 × (1 - 0.88) = 54.2628 GiB; / 131,072 B = 444,520 (log 444,500:
    # the log's avail figures are rounded to 0.01 GiB = ±82 tokens). mfs 0.88 = the TP1 default.
    r = plan("meta-llama/Meta-Llama-3.1-8B-Instruct", version="0.4.1", gpu="h100", free_gib=78.81,
             weights_gib=78.81 - 63.72)
    p = r.plan.per_rank
    assert p.static.mem_fraction_static == 0.88
    assert abs(p.kv_tokens - 444500) <= 100
    # estimated = min(max(444,500 / 131,072 × 512, 2048), 4096) = 2048; ReqToTokenPool(size=2048 + 1);
    # max_running = min(444,500 // 2, 2049) = 2049 (as logged)
    assert p.max_running_requests == 2049
    assert p.static.req_to_token_bytes == 2049 * (131072 + 4) * 4


def test_llmtracker_v03_mi300x_llama3_8b():
    # llm-tracker MI300X notes (logcorpus llmtracker-sglang03-mi300x-llama3-8b-bench), sglang 0.3.x, TP1:
    # "Load weight begin. avail mem=191.33 GB", "Load weight end ... avail mem=176.33 GB", max_total_num_tokens=1256440
    # rest = 176.33 - 191.33 × 0.12 = 153.3704 GiB; / 131,072 B = 1,256,410 (±82 tokens of log rounding per 0.01 GiB)
    for version in ("0.3.0", "0.3.2", "0.3.4.post2", "0.3.6"):
        r = plan("meta-llama/Meta-Llama-3-8B-Instruct", version=version, gpu="mi300x", free_gib=191.33,
                 weights_gib=15.0)
        assert r.plan.per_rank.static.mem_fraction_static == 0.88
        assert abs(r.plan.per_rank.kv_tokens - 1256440) <= 2 * 82, version


def test_a40_tp4_v042_request_pool():
    # issue #3507 (logcorpus sglang-3507-qwen2-fp16-4xa40-v042): "max_total_num_tokens=413096, ...,
    # max_running_requests=4097, context_len=32768": estimated = min(max(413,096 / 32,768 × 512, 2048), 4096)
    # = 4096 -> ReqToTokenPool(size=4097) -> max_running = min(413,096 // 2, 4097) = 4097.
    from kvplan.engines.cmdline import split_command
    from kvplan.engines.sglang.args import parse_sglang
    from kvplan.engines.sglang.req_pool import req_pool
    from kvplan.engines.sglang.rules import rules_for

    args = parse_sglang(split_command([*SGL, "x", "--tp", "4"]))
    rp = req_pool(413096, 32768, args, rules_for("0.4.2"))
    assert (rp.max_running_requests, rp.rows, rp.cols) == (4097, 4097, 32772)
    # the same tokens on 0.4.7+ (size = estimated, no +1) give 4096
    assert req_pool(413096, 32768, args, rules_for("0.4.7")).max_running_requests == 4096


def test_v030_request_pool():
    # 0.3.0: cap 5120, ReqToTokenPool(estimated, context_len + 8), max_running = min(tokens // 2, size - 1);
    # Llama-3-8B ctx 8192, 1,256,410 tokens: 1,256,410 / 8192 × 512 = 78,525 -> 5120 -> 5119
    from kvplan.engines.cmdline import split_command
    from kvplan.engines.sglang.args import parse_sglang
    from kvplan.engines.sglang.req_pool import req_pool
    from kvplan.engines.sglang.rules import rules_for

    args = parse_sglang(split_command([*SGL, "x"]))
    rp = req_pool(1256410, 8192, args, rules_for("0.3.0"))
    assert (rp.max_running_requests, rp.rows, rp.cols) == (5119, 5120, 8200)
    # 0.3.1: cap 4096, size = estimated, context + 8; max_running = min(., size)
    rp = req_pool(1256410, 8192, args, rules_for("0.3.1"))
    assert (rp.max_running_requests, rp.rows, rp.cols) == (4096, 4096, 8200)
    # 0.3.0 ignores --max-running-requests for the pool size (init_memory_pool gets --max-num-reqs)
    args = parse_sglang(split_command([*SGL, "x", "--max-running-requests", "64"]))
    rp = req_pool(1256410, 8192, args, rules_for("0.3.0"))
    assert (rp.max_running_requests, rp.rows) == (64, 5120)


def test_mla_needs_enable_mla_on_030():
    with pytest.raises(KvplanError, match="--enable-mla"):
        plan("deepseek-ai/DeepSeek-V3", "--tp", "8", version="0.3.0", gpu="h200")
    r = plan("deepseek-ai/DeepSeek-V3", "--tp", "8", "--enable-mla", version="0.3.0", gpu="h200")
    assert r.plan.per_rank.kv_bytes_per_token == 70272  # (512 + 64) × 61 × 2 B, replicated
    with pytest.raises(KvplanError, match="--disable-mla"):
        plan("deepseek-ai/DeepSeek-V3", "--tp", "8", "--disable-mla", version="0.4.1", gpu="h200")


def test_older_than_030_refused():
    with pytest.raises(KvplanError, match="outside what kvplan has read"):
        plan("meta-llama/Meta-Llama-3-8B-Instruct", version="0.2.15", gpu="h100")
