"""SGLang default mem_fraction_static / chunked_prefill_size / decode max_bs per version
(kvplan/engines/sglang/defaults.py).

Every expected value is computed by hand from the released wheel source; the arithmetic is in the comments.
"""

from __future__ import annotations

import pytest

from kvplan.engines.sglang.defaults import DefaultsInput, resolve_defaults
from kvplan.engines.versions import Version
from kvplan.errors import KvplanError

RTX4090, A100_40, L40S, H100, A100_80, H200, B200 = 24564, 40960, 46068, 81559, 81920, 143771, 183359


def mfs(version, gpu, **kw):
    return resolve_defaults(DefaultsInput(version, gpu, **kw)).mem_fraction_static


def res(version, gpu, **kw):
    return resolve_defaults(DefaultsInput(version, gpu, **kw))


# --- version parsing


@pytest.mark.parametrize(
    "lower, text, upper",
    [
        ("0.4.6.post4", "0.4.6.post5", "0.4.7"),
        ("0.5.8", "v0.5.9", "0.5.9.post1"),
        ("0.5.8", "0.5.9+cu124", "0.5.9.post1"),
        ("0.5.9.post9", "0.5.10rc0", "0.5.10"),  # a release candidate sorts just before its release
        ("0.5.9.post9", "0.5.10.dev3", "0.5.10rc0"),
        ("0.4.99", "0.5", "0.5.0.post1"),
    ],
)
def test_versions_order_like_the_release_tables(lower, text, upper):
    assert Version(lower) < Version(text) < Version(upper)
    assert Version("0.5") == Version("0.5.0") and Version("v0.5.9") == Version("0.5.9+cu124")


def test_version_rejects_garbage():
    with pytest.raises(KvplanError):
        Version("latest")


def test_unknown_versions_raise():
    with pytest.raises(ValueError, match="older"):
        resolve_defaults(DefaultsInput("0.2.15", H100))
    with pytest.raises(ValueError, match="newer"):
        resolve_defaults(DefaultsInput("0.5.24", H100))
    # a post release of the newest read version keeps its rules
    assert mfs("0.5.23.post1", H100) == 0.830


def test_prerelease_gets_previous_rule():
    # 0.5.10rc0 sorts before 0.5.10, so it gets the 0.5.3-0.5.9 rule: EAGLE +2 GiB, no piecewise term:
    # 512 + 1.5*8192 + 2*256 + 1024/8 = 13440; +2048 = 15488; (81559-15488)/81559 = 0.81010 -> 0.810
    assert mfs("0.5.10rc0", H100, speculative_algorithm="EAGLE") == 0.810


# --- 0.5.23: the table in sglang-memory.md §1.6

TABLE_0523 = {
    RTX4090: (0.704, 0.698, 0.679, 0.658, 0.612),
    A100_40: (0.823, 0.820, 0.807, 0.795, 0.767),
    L40S: (0.843, 0.840, 0.829, 0.818, 0.793),
    H100: (0.830, 0.828, 0.819, 0.812, 0.799),
    A100_80: (0.830, 0.829, 0.819, 0.813, 0.800),
    H200: (0.903, 0.902, 0.897, 0.893, 0.886),
    B200: (0.854, 0.853, 0.852, 0.849, 0.844),
}


@pytest.mark.parametrize("gpu", list(TABLE_0523))
def test_0523_table(gpu):
    row = TABLE_0523[gpu]
    for tp, expected in zip((1, 2, 4, 8), row[:4], strict=True):
        assert mfs("0.5.23", gpu, tp=tp) == expected, (gpu, tp)
    assert mfs("0.5.23", gpu, tp=8, is_mla=True) == row[4]


def test_0523_worked_example_h100_tp1():
    # 512 + 1.5*8192 + 1024*1/8 + 2*256 + 8*58 prefill sizes = 13,904 MiB
    # (81559-13904)/81559 = 0.8295 -> 0.830
    r = res("0.5.23", H100)
    assert r.reserved_mib == 13904
    assert r.mem_fraction_static == 0.830
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs) == (8192, 256)
    assert "memory_hook.py::handle_gpu_memory_settings" in r.rule


def test_0523_buckets_and_fallback():
    r = res("0.5.23", RTX4090, tp=4)
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs) == (4096, 160)
    r = res("0.5.23", None)
    assert (r.mem_fraction_static, r.chunked_prefill_size, r.cuda_graph_max_bs) == (0.95, 4096, 160)
    assert r.reserved_mib is None
    assert res("0.5.23", B200).chunked_prefill_size == 16384


def test_0522_max_running_requests_lowers_default_decode_bs():
    # 0.5.22+: default max_bs 256 > --max-running-requests 64 -> 64.
    # 512 + 12288 + 2*64 + 128 + 464 = 13520 (> 10240 floor); (81559-13520)/81559 = 0.83423 -> 0.834
    r = res("0.5.22", H100, max_running_requests=64)
    assert (r.cuda_graph_max_bs, r.mem_fraction_static) == (64, 0.834)
    # 0.5.21 does not lower it: same as the plain H100 value
    assert res("0.5.21", H100, max_running_requests=64).cuda_graph_max_bs == 256
    # an explicit --cuda-graph-max-bs is never lowered
    assert res("0.5.23", H100, max_running_requests=32, cuda_graph_max_bs=64).cuda_graph_max_bs == 64


def test_0519_small_gpu_buckets_and_088_fallback():
    # 0.5.19 (<35 GiB): chunk 2048, max_bs 24; prefill sizes <=2048 = 8+14+8+8+4 = 42 -> 336 MiB
    # 512 + 1.5*2048 + 2*24 + 128 + 336 = 4096; (24564-4096)/24564 = 0.83325 -> 0.833
    r = res("0.5.19", RTX4090)
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs, r.mem_fraction_static) == (2048, 24, 0.833)
    assert mfs("0.5.19", None) == 0.88
    assert mfs("0.5.20", None) == 0.95
    assert mfs("0.5.20", RTX4090) == 0.704  # 0.5.20 already has the 4096/48 bucket


def test_pp_prefill_graph_by_version():
    # pp=2, H100 tp1. With the prefill graph: 512 + 12288 + 512 + 256 + 464 = 14032
    # -> 67527/81559 = 0.82795 -> 0.828
    # without it: 13568 -> 67991/81559 = 0.83364 -> 0.834
    assert mfs("0.5.14", H100, pp=2) == 0.834  # TC_PIECEWISE rules disable pp>1
    assert mfs("0.5.16", H100, pp=2) == 0.828  # BREAKABLE rules (0.5.15-0.5.18) have no pp rule
    assert mfs("0.5.19", H100, pp=2) == 0.834  # apply_cuda_graph_compatibility: pp opts out


# --- 0.5.14 .. 0.5.18


def test_0514_no_spec_reserve():
    # 0.5.14 drops the speculative reserve: EAGLE on H100 tp1 = plain 13904 -> 0.830
    assert mfs("0.5.14", H100, speculative_algorithm="EAGLE") == 0.830
    assert "0.5.14-0.5.18" in res("0.5.14", H100).rule


def test_mla_prefill_graph_by_version():
    # MLA H100 tp8: 512 + 12288 + 2*512 + 1024 = 14848 without prefill graph -> 66711/81559 = 0.81795 -> 0.818
    # + flat 1536 with it = 16384 -> 65175/81559 = 0.79911 -> 0.799
    assert mfs("0.5.14", H100, tp=8, is_mla=True) == 0.799  # TC piecewise keeps MLA
    assert mfs("0.5.15", H100, tp=8, is_mla=True) == 0.818  # BCG default disables MLA
    assert mfs("0.5.17", H100, tp=8, is_mla=True) == 0.818  # "MLA attention (non-DSA)" rule
    assert mfs("0.5.18", H100, tp=8, is_mla=True) == 0.799  # rule removed


def test_disable_cuda_graph_by_version():
    # 0.5.15+: no decode or prefill graph term: 512 + 12288 + 128 = 12928 -> 68631/81559 = 0.84149 -> 0.841
    assert mfs("0.5.15", H100, disable_cuda_graph=True) == 0.841
    # 0.5.14: decode term still counted, prefill disabled: 13440 -> 68119/81559 = 0.83521 -> 0.835
    assert mfs("0.5.14", H100, disable_cuda_graph=True) == 0.835
    # 0.5.12: --disable-cuda-graph touches neither term: 13904 -> 0.830
    assert mfs("0.5.12", H100, disable_cuda_graph=True) == 0.830


def test_dp_attention_prefill_graph_by_version():
    # H100 tp8 dp8 DP-attention, max_bs 512: 512 + 12288 + 2*512 + 1024 + 512*8*3 + 512*8*1.5 = 33280
    # -> 48279/81559 = 0.59195 -> 0.592. 0.5.17 keeps BCG under DP-attention: +464 = 33744 -> 0.58626 -> 0.586
    kw = dict(tp=8, dp=8, enable_dp_attention=True)
    assert mfs("0.5.16", H100, **kw) == 0.592
    r = res("0.5.17", H100, **kw)
    assert (r.mem_fraction_static, r.reserved_mib) == (0.586, 33744)
    assert r.chunked_prefill_size == 8192 // 8  # divided after the reserve


# --- 0.5.10 .. 0.5.13


def test_0510_piecewise_and_spec():
    # piecewise default-on: 512 + 12288 + 512 + 128 + 8*58 = 13904 -> 0.830
    assert mfs("0.5.10", H100) == 0.830
    # 0.5.10: spec disables piecewise, EAGLE reserve is 4 GiB: 13440 + 4096 = 17536
    # -> 64023/81559 = 0.78499 -> 0.785
    assert mfs("0.5.10", H100, speculative_algorithm="EAGLE") == 0.785
    assert mfs("0.5.10.post1", H100, speculative_algorithm="EAGLE") == 0.785
    # 0.5.11: spec no longer disables piecewise: 13904 + 4096 = 18000 -> 63559/81559 = 0.77930 -> 0.779
    assert mfs("0.5.11", H100, speculative_algorithm="EAGLE") == 0.779
    # STANDALONE +6 GiB: 13904 + 6144 = 20048 -> 61511/81559 = 0.75419 -> 0.754
    assert mfs("0.5.13", H100, speculative_algorithm="STANDALONE") == 0.754
    assert "0.5.10-0.5.13" in res("0.5.12", H100).rule


def test_0512_a100_40g_and_0513_context_clamp():
    # A100-40G: chunk 4096, max_bs 32, 50 prefill sizes: 512 + 6144 + 64 + 128 + 400 = 7248
    # -> (40960-7248)/40960 = 0.82305 -> 0.823
    assert mfs("0.5.12", A100_40) == 0.823
    # 0.5.13-0.5.16 clamp the prefill graph to --context-length: 2048 -> 42 sizes -> 336 MiB:
    # 7184 -> 33776/40960 = 0.82461 -> 0.825
    assert mfs("0.5.13", A100_40, context_len=2048) == 0.825
    assert mfs("0.5.12", A100_40, context_len=2048) == 0.823  # no clamp before 0.5.13
    assert mfs("0.5.17", A100_40, context_len=2048) == 0.823  # clamp removed in 0.5.17


# --- 0.5.3 .. 0.5.9


def test_053_to_059():
    # 0.5.3 (<35 GiB): chunk 2048, max_bs 16: 512 + 3072 + 32 + 128 = 3744 -> 20820/24564 = 0.84758 -> 0.848
    r = res("0.5.3", RTX4090)
    assert (r.mem_fraction_static, r.chunked_prefill_size, r.cuda_graph_max_bs) == (0.848, 2048, 16)
    assert res("0.5.4", RTX4090).cuda_graph_max_bs == 16
    # 0.5.4.post1 raised it to 24: 3760 -> 20804/24564 = 0.84693 -> 0.847
    assert res("0.5.4.post1", RTX4090).cuda_graph_max_bs == 24
    assert mfs("0.5.6", RTX4090) == 0.847
    # 0.5.9 H100: 13440 (> floor), EAGLE +2048 after the floor = 15488 -> 0.810; NGRAM adds nothing -> 0.835
    assert mfs("0.5.9", H100, speculative_algorithm="EAGLE") == 0.810
    assert mfs("0.5.9", H100, speculative_algorithm="NGRAM") == 0.835
    assert mfs("0.5.9", None) == 0.88
    # DP attention tp8 dp8: 33280 (see above, no prefill graph in 0.5.9) -> 0.592; chunk 8192 // 8
    r = res("0.5.9", H100, tp=8, dp=8, enable_dp_attention=True)
    assert (r.mem_fraction_static, r.chunked_prefill_size) == (0.592, 1024)
    assert "ServerArgs._handle_gpu_memory_settings" in r.rule


def test_floor_applies_before_spec_reserve():
    # L40S is under 60 GiB: no 10 GiB floor. 0.5.3: 512 + 1.5*4096 + 2*32 + 128 = 6848; EAGLE +2048 = 8896
    # -> (46068-8896)/46068 = 0.80689 -> 0.807
    assert mfs("0.5.3", L40S, speculative_algorithm="EAGLE") == 0.807
    # A100-80G tp1 with a small chunk: 512 + 3072 + 512 + 128 = 4224 -> floor 10240 -> 71680/81920 = 0.875
    assert res("0.5.9", A100_80, chunked_prefill_size=2048).reserved_mib == 10240


# --- 0.4.7.post1 .. 0.5.2: GiB buckets


def test_gib_bucket_branch():
    # H100 tp1: (9.5 + 1/2) GiB = 10240 MiB -> 71319/81559 = 0.87444 -> 0.874
    # chunk 8192; max_bs 160 (the capture list grows only above 90 GiB)
    r = res("0.4.10.post2", H100)
    assert (r.mem_fraction_static, r.reserved_mib, r.chunked_prefill_size, r.cuda_graph_max_bs) == (
        0.874, 10240, 8192, 160)
    assert mfs("0.4.7.post1", H100) == 0.874  # the buckets already exist in 0.4.7.post1
    # H200 tp8: (12 + 8/2) GiB = 16384 -> 127387/143771 = 0.88604 -> 0.886; max_bs 256 (> 90 GiB)
    r = res("0.4.8", H200, tp=8)
    assert (r.mem_fraction_static, r.cuda_graph_max_bs) == (0.886, 256)
    # RTX 4090 tp1: (2.8 + 0.1) GiB = 2969.6 -> 21594.4/24564 = 0.87911 -> 0.879; chunk 2048; max_bs 8
    r = res("0.4.9", RTX4090)
    assert (r.mem_fraction_static, r.chunked_prefill_size, r.cuda_graph_max_bs) == (0.879, 2048, 8)
    # B200: 32 GiB; STANDALONE +6 GiB from 0.5.2 = 38912 -> 144447/183359 = 0.78778 -> 0.788; max_bs 512
    r = res("0.5.2", B200, speculative_algorithm="STANDALONE")
    assert (r.mem_fraction_static, r.chunked_prefill_size, r.cuda_graph_max_bs) == (0.788, 16384, 512)
    # 0.5.1 has no STANDALONE rule: +2 GiB = 34816 -> 148543/183359 = 0.81012 -> 0.810
    assert mfs("0.5.1", B200, speculative_algorithm="STANDALONE") == 0.810
    # DP attention H100 tp8 dp8: (9.5 + 4 + 4) GiB = 17920 -> 63639/81559 = 0.78028 -> 0.780; chunk 8192 // 8
    r = res("0.4.9", H100, tp=8, dp=8, enable_dp_attention=True)
    assert (r.mem_fraction_static, r.chunked_prefill_size) == (0.780, 1024)
    r = res("0.5.2", None)
    assert (r.mem_fraction_static, r.chunked_prefill_size, r.cuda_graph_max_bs) == (0.88, 4096, 160)


def test_gib_bucket_vlm_factors():
    # 0.874 x 0.90 in model_runner (<=0.4.8.post1) and in server_args (0.4.9-0.4.9.post2)
    assert mfs("0.4.8", H100, is_multimodal=True) == pytest.approx(0.874 * 0.9)
    assert mfs("0.4.9.post2", H100, is_multimodal=True) == pytest.approx(0.874 * 0.9)
    # 0.4.9.post3: ViT factor, defaults 24 layers x 1024 -> ratio 1 -> 0.95
    assert mfs("0.4.9.post3", H100, is_multimodal=True) == pytest.approx(0.874 * 0.95)


# --- 0.4.7


def test_047():
    # B200 (> 180,000 MiB): 0.79, chunk 16384, capture list grows to 512
    r = res("0.4.7", B200)
    assert (r.mem_fraction_static, r.chunked_prefill_size, r.cuda_graph_max_bs) == (0.79, 16384, 512)
    # spec on an 80 GB card: 0.88 x 0.95 = 0.836
    assert mfs("0.4.7", H100, speculative_algorithm="EAGLE") == pytest.approx(0.836)
    # spec on H200: min(0.88 + 48 GiB*0.12/g, (g - 20 GiB)/g) = min(0.92103, 123291/143771 = 0.85755)
    assert mfs("0.4.7", H200, speculative_algorithm="EAGLE") == pytest.approx(123291 / 143771)


# --- 0.4.6.post2 .. 0.4.6.post5: tp x pp table


@pytest.mark.parametrize(
    "tp, pp, expected",
    [(1, 1, 0.88), (2, 1, 0.87), (1, 2, 0.87), (4, 1, 0.85), (2, 2, 0.85), (8, 1, 0.81), (4, 2, 0.81),
     (16, 1, 0.79), (8, 2, 0.79)],
)
def test_0406post5_tp_pp_table(tp, pp, expected):
    assert mfs("0.4.6.post5", H100, tp=tp, pp=pp) == expected
    assert mfs("0.4.6.post2", A100_80, tp=tp, pp=pp) == expected  # 81920 is still <= 81920


def test_0406post5_large_gpus():
    # 81920 < g <= 96 GiB: flat 0.88 whatever tp (H20 reports 97871 MiB < 98304)
    assert mfs("0.4.6.post5", 97871, tp=8) == 0.88
    # H200: min(0.88 + 49152*0.12/143771, (143771-18432)/143771) = min(0.92103, 0.87180)
    assert mfs("0.4.6.post5", H200, tp=8) == pytest.approx(125339 / 143771)
    assert res("0.4.6.post5", H200).cuda_graph_max_bs == 256  # > 96 GiB adds 160..256
    assert mfs("0.4.6.post5", None) == 0.88
    with pytest.raises(ValueError, match="crashes"):
        resolve_defaults(DefaultsInput("0.4.6.post3", None))


def test_legacy_explicit_cuda_graph_max_bs_padding():
    # 0.4.6.post4+: list max 160 < 200 -> add range(160, 201, 16) = 160, 176, 192 -> 192
    assert res("0.4.6.post5", H100, cuda_graph_max_bs=200).cuda_graph_max_bs == 192
    assert res("0.4.6.post3", H100, cuda_graph_max_bs=200).cuda_graph_max_bs == 160  # no padding yet


# --- 0.4.5.post3 .. 0.4.6.post1


def test_0405post3_to_0406post1():
    # <= 81920 MiB: tp table (tp only, pp ignored)
    assert mfs("0.4.6", H100, tp=2, pp=2) == 0.87
    # H200: (143771 - 13*1024)/143771, unrounded
    assert mfs("0.4.5.post3", H200) == pytest.approx(130459 / 143771)
    # capture list: +160..256 on > 81920 MiB; 0.4.6/0.4.6.post1 only with dp_size == 1
    assert res("0.4.6.post1", H200).cuda_graph_max_bs == 256
    assert res("0.4.6.post1", H200, dp=2).cuda_graph_max_bs == 160
    assert res("0.4.5.post3", H200, dp=2).cuda_graph_max_bs == 256
    with pytest.raises(ValueError):
        resolve_defaults(DefaultsInput("0.4.6", None))


# --- 0.4.4 .. 0.4.5.post2


def test_044_tp_table():
    r = res("0.4.4", H100, tp=4)
    assert (r.mem_fraction_static, r.chunked_prefill_size, r.cuda_graph_max_bs, r.reserved_mib) == (
        0.85, 8192, 160, None)
    assert mfs("0.4.5.post2", H200, tp=1) == 0.88  # no GPU-size condition yet
    r = res("0.4.4", 24000, tp=1)
    assert (r.chunked_prefill_size, r.cuda_graph_max_bs) == (2048, 8)
    assert res("0.4.4", 24000, tp=4).cuda_graph_max_bs == 80
    assert res("0.4.4", H100, speculative_algorithm="EAGLE").cuda_graph_max_bs == 32  # range(1, 33)
    # DP attention: 0.4.4 halves the chunk, 0.4.5 divides by dp
    assert res("0.4.4", H100, tp=8, dp=8, enable_dp_attention=True).chunked_prefill_size == 4096
    assert res("0.4.5", H100, tp=8, dp=8, enable_dp_attention=True).chunked_prefill_size == 1024
    assert mfs("0.4.4", None) == 0.88


# --- VLM (gemma-3-4b-it: vision tower 27 layers x 1152)

# ratio = 27*1152^2 / (24*1024^2) = 1.423828; factor = 0.95 * (1 - 0.1*0.423828) = 0.909736
GEMMA_VIT = dict(is_multimodal=True, vit_layers=27, vit_hidden=1152)


def test_gemma3_vlm_examples():
    # 0.5.23 H200 tp1: the VLM drops the prefill-graph term: 512 + 12288 + 128 + 512 = 13440
    # -> 130331/143771 = 0.90652 -> 0.907; x 0.909736 = 0.82513
    assert mfs("0.5.23", H200, **GEMMA_VIT) == pytest.approx(0.907 * 0.909736328125)
    assert round(mfs("0.5.23", H200, **GEMMA_VIT), 3) == 0.825
    assert round(mfs("0.5.9", H200, **GEMMA_VIT), 3) == 0.825
    # 0.4.6.post5 H200: min(0.92103, 0.87180) x 0.90 (model_runner) = 0.78462
    assert round(mfs("0.4.6.post5", H200, **GEMMA_VIT), 3) == 0.785
    # 0.4.4.post2/post3: 0.88 x 0.95; 0.4.4.post4 .. 0.4.5.x (<= 80 GiB): 0.88 x 0.90
    assert mfs("0.4.4.post2", H100, **GEMMA_VIT) == pytest.approx(0.836)
    assert mfs("0.4.4.post4", H100, **GEMMA_VIT) == pytest.approx(0.792)
    assert mfs("0.4.5", H200, **GEMMA_VIT) == pytest.approx(0.792)
