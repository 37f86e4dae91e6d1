"""SGLang's default mem_fraction_static, chunked_prefill_size and decode CUDA-graph max_bs, per version.

Reproduced from the released wheels 0.4.4 .. 0.5.23 (every release around each change point was read);
0.3.0 .. 0.4.3.post4 (every release read) are in ``defaults_old.py``.
Units as SGLang uses them: ``gpu_mem_mib`` is ``nvidia-smi memory.total`` in MiB (min over visible GPUs).
Source and the research notes (shared/reference/sglang-memory.md §1.6) disagree in places; the source wins:
  * the GiB reserve buckets start in 0.4.7.post1, not 0.4.10.post2;
  * the ``gpu <= 80 GiB`` tp table starts in 0.4.5.post3, not 0.4.6;
  * 0.5.10-0.5.13 reserve 4 GiB (not 2) for EAGLE-type speculative decoding;
  * the prefill-graph reserve starts in 0.5.10 (piecewise default-on), not 0.5.14;
    MLA gets none in 0.5.15-0.5.17;
  * the 0.88 -> 0.95 unknown-GPU fallback is 0.5.20; the code moved to arg_groups/memory_hook.py in 0.5.19.
Not modelled (the caller handles or ignores them): PD disaggregation, DeepEP/a2a backends, LoRA, HiCache,
torch compile, post-capture KV sizing (env, off by default), per-architecture allow/deny lists (a multimodal
model is taken to be off the prefill-graph allow-list), ROCm/NPU/XPU, ``llama-2`` and ``--max-total-tokens``.
"""

from __future__ import annotations

from functools import lru_cache

from kvplan.engines.sglang.defaults_io import DefaultsInput, ResolvedDefaults
from kvplan.engines.versions import Version, within

__all__ = ["NEWEST", "OLDEST", "DefaultsInput", "ResolvedDefaults", "resolve_defaults"]


def _v(text: str) -> Version:  # "0.5.10rc0" sorts just before 0.5.10, "0.4.6.post5" after 0.4.6.post4
    return Version(text)


OLDEST, NEWEST = "0.3.0", "0.5.23"
GIB = 1024  # MiB


def _tp_table(n: int) -> float:
    return 0.79 if n >= 16 else 0.81 if n >= 8 else 0.85 if n >= 4 else 0.87 if n >= 2 else 0.88


def _vit_factor(inp: DefaultsInput) -> float:
    # server_args.py::ServerArgs.adjust_mem_fraction_for_vlm (0.4.9.post3+), memory_hook.py (0.5.19+)
    layers = 24 if inp.vit_layers is None else inp.vit_layers
    hidden = 1024 if inp.vit_hidden is None else inp.vit_hidden
    ratio = layers * hidden**2 / (24 * 1024**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def _mm_factor(inp: DefaultsInput, v: Version) -> tuple[float, str]:
    if not inp.is_multimodal:
        return 1.0, ""
    if v < _v("0.4.4.post4"):  # model_runner.py::ModelRunner.model_specific_adjustment (hits explicit too)
        return 0.95, "; VLM x0.95 (model_runner, also applies to an explicit value)"
    if v < _v("0.4.9"):  # same function, 0.4.4.post4 .. 0.4.8.post1
        return 0.90, "; VLM x0.90 (model_runner, also applies to an explicit value)"
    if v < _v("0.4.9.post3"):  # server_args.py::ServerArgs.__post_init__, default only
        return 0.90, "; VLM x0.90"
    return _vit_factor(inp), "; VLM ViT-scaled factor"


def _legacy_decode_max_bs(inp: DefaultsInput, v: Version, cap: int | None) -> int:
    """<=0.5.2: cuda_graph_runner.py::get_batch_sizes_to_capture (largest size, before the req-pool clamp)."""
    g = inp.gpu_mem_mib
    if inp.speculative_algorithm is None:
        bs = [1, 2, 4] + list(range(8, 161, 8))
    elif v < _v("0.4.4.post3"):
        bs = list(range(1, 33))
    elif v < _v("0.4.4.post4"):
        bs = list(range(1, 9)) + list(range(9, 33, 2)) + [64, 96, 128, 160]
    elif v < _v("0.4.7"):
        bs = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 161, 16))
    else:
        bs = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 64, 8)) + list(range(80, 161, 16))
    if g is not None and v >= _v("0.4.5.post3"):
        if v < _v("0.4.6.post2"):
            if g > 81920 and (inp.dp == 1 or v < _v("0.4.6")):
                bs += list(range(160, 257, 8))
        elif v < _v("0.4.7.post1"):
            bs += list(range(160, 257, 8)) if g > 96 * GIB else []
            bs += list(range(256, 513, 16)) if v >= _v("0.4.7") and g > 180_000 else []
        else:
            bs += list(range(160, 257, 8)) if g > 90 * GIB else []
            bs += list(range(256, 513, 16)) if g > 160_000 else []
    if cap:
        bs = [b for b in bs if b <= cap]
        if v >= _v("0.4.6.post4") and max(bs) < cap:
            bs += list(range(max(bs), cap + 1, 16))
    return max(bs)


def _legacy(inp: DefaultsInput, v: Version) -> ResolvedDefaults:
    """0.4.4 .. 0.5.2, all in server_args.py::ServerArgs.__post_init__."""
    g, tp, spec = inp.gpu_mem_mib, inp.tp, inp.speculative_algorithm
    reserved = None
    if v < _v("0.4.7.post1"):  # chunked prefill and cuda_graph_max_bs keyed on 25,000 MiB
        chunk = 2048 if g is not None and g < 25_000 else 8192
        if v >= _v("0.4.7") and g is not None and g > 180_000:
            chunk = 16384
        small = g is not None and g < 25_000
        cap = (8 if tp < 4 else 80) if small else (160 if v < _v("0.4.5.post3") else None)
    else:  # 0.4.7.post1 .. 0.5.2: keyed on 35 GiB / 160 GiB
        chunk = 4096 if g is None else 2048 if g < 35 * GIB else 8192 if g < 160 * GIB else 16384
        cap = (8 if tp < 4 else 80) if g is not None and g < 35 * GIB else None
    if inp.cuda_graph_max_bs is not None:
        cap = inp.cuda_graph_max_bs
    if inp.chunked_prefill_size is not None:
        chunk = inp.chunked_prefill_size

    if v < _v("0.4.5.post3"):  # server_args.py::ServerArgs.__post_init__ (tp_size table only)
        mfs, rule = _tp_table(tp), "0.4.4-0.4.5.post2: tp table"
    elif v < _v("0.4.6.post2"):  # server_args.py::ServerArgs.__post_init__
        if g is None:
            raise ValueError(f"SGLang {inp.version} crashes without a GPU memory size (None <= 81920)")
        mfs = _tp_table(tp) if g <= 81920 else (g - 13 * GIB) / g
        rule = "0.4.5.post3-0.4.6.post1: tp table <=80 GiB else (gpu-13GiB)/gpu"
    elif v < _v("0.4.7.post1"):  # server_args.py::ServerArgs.__post_init__ (tp*pp table, big-GPU headroom)
        if g is None and v < _v("0.4.6.post5"):
            raise ValueError(f"SGLang {inp.version} crashes without a GPU memory size (None <= 81920)")
        mfs = _tp_table(tp * inp.pp) if g is not None and g <= 81920 else 0.88
        rule = "0.4.6.post2-0.4.6.post5: tp*pp table + >96 GiB headroom"
        if v >= _v("0.4.7"):
            rule = "0.4.7: tp*pp table + >96 GiB headroom, B200 0.79, spec x0.95"
        if v >= _v("0.4.7") and g is not None and g > 180_000:
            mfs = 0.79
        elif g is not None and g > 96 * GIB:
            res = (20 if spec is not None and v >= _v("0.4.7") else 18) * GIB
            mfs = min(mfs + 48 * GIB * (1 - mfs) / g, (g - res) / g)
        elif spec is not None and v >= _v("0.4.7"):
            mfs *= 0.95
    else:  # server_args.py::ServerArgs.__post_init__, 0.4.7.post1 .. 0.5.2
        rule = "0.4.7.post1-0.5.2: GiB reserve buckets"
        if g is None:
            mfs = 0.88
        else:
            ps = tp * inp.pp
            gib = 2.8 + ps / 10 if g < 35 * GIB else 9.5 + ps / 2 if g < 90 * GIB else 12 + ps / 2
            gib = 32 if g >= 160 * GIB else gib
            if spec is not None:
                gib += 6 if spec == "STANDALONE" and v >= _v("0.5.2") else 2
            gib += 4 if inp.enable_dp_attention else 0
            reserved = gib * GIB
            mfs = round((g - reserved) / g, 3)
    f, note = _mm_factor(inp, v)
    if inp.enable_dp_attention:  # _handle_data_parallelism equivalent in __post_init__
        chunk = chunk // 2 if v < _v("0.4.5") else chunk // max(inp.dp, 1)
    src = " (server_args.py::ServerArgs.__post_init__)"
    fallback = "; gpu_mem unknown" if g is None else ""
    max_bs = _legacy_decode_max_bs(inp, v, cap)
    return ResolvedDefaults(mfs * f, chunk, max_bs, reserved, rule + src + note + fallback)


def _prefill_sizes(max_bs: int) -> int:
    """Count of prefill capture sizes (cuda_graph_hook.py::generate_prefill_cuda_graph_batch_sizes)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return len([s for s in sizes if s <= max_bs])


def _prefill_graph_on(inp: DefaultsInput, v: Version) -> bool:
    """Whether the default prefill graph survives the auto-disable rules that run before the reserve."""
    if v < _v("0.5.10") or inp.is_multimodal:  # opt-in before 0.5.10; VLMs off unless allow-listed
        return False
    if v < _v("0.5.14"):  # server_args.py::ServerArgs._handle_piecewise_cuda_graph (not --disable-cuda-graph)
        spec_off = v < _v("0.5.11") and inp.speculative_algorithm is not None
        return not (inp.enable_dp_attention or inp.pp > 1 or spec_off)
    if inp.disable_cuda_graph:  # _parse_cuda_graph_config disables both phases
        return False
    if v < _v("0.5.15"):  # ServerArgs._disable_tc_piecewise_cudagraph_if_incompatible (TC_PIECEWISE default)
        return not (inp.enable_dp_attention or inp.pp > 1)
    if v < _v("0.5.17"):  # ServerArgs._disable_breakable_cudagraph_if_incompatible (BREAKABLE default)
        return not (inp.is_mla or inp.enable_dp_attention)
    if v < _v("0.5.18"):  # same, MLA (non-DSA) rule still there
        return not inp.is_mla
    if v < _v("0.5.19"):
        return True
    return inp.pp == 1  # cuda_graph_hook.py::apply_cuda_graph_compatibility: PP opts out by default


def _reserve_formula(inp: DefaultsInput, v: Version) -> ResolvedDefaults:
    """0.5.3+: server_args.py::ServerArgs._handle_gpu_memory_settings; 0.5.19+: memory_hook.py."""
    g, tp = inp.gpu_mem_mib, inp.tp
    if g is None:
        chunk, bs = 4096, 160
    elif g < 20 * GIB:
        chunk, bs = 2048, 8
    elif g < 35 * GIB:
        if v >= _v("0.5.20"):
            chunk, bs = 4096, (48 if tp < 4 else 160)
        else:
            chunk, bs = 2048, ((16 if v < _v("0.5.4.post1") else 24) if tp < 4 else 80)
    elif g < 60 * GIB:
        chunk, bs = 4096, (32 if tp < 4 else 160)
    elif g < 160 * GIB:
        chunk, bs = 8192, (256 if tp < 4 else 512)
    else:
        chunk, bs = 16384, 512
    chunk = chunk if inp.chunked_prefill_size is None else inp.chunked_prefill_size
    if inp.cuda_graph_max_bs is not None:
        bs = inp.cuda_graph_max_bs
    elif v >= _v("0.5.22") and inp.max_running_requests is not None and bs > inp.max_running_requests:
        bs = inp.max_running_requests
    dp = max(inp.dp, 1)

    reserved = 512 + max(chunk if chunk > 0 else 16384, 2048) * 1.5  # 16384 = default max_prefill_tokens
    if v < _v("0.5.15") or not inp.disable_cuda_graph:
        reserved += bs * 2
    reserved += tp * inp.pp / 8 * 1024
    if inp.enable_dp_attention:
        reserved += bs * dp * 3 + (bs * dp * 1.5 if bs > 300 else 0)
    if _prefill_graph_on(inp, v):
        pmax = chunk
        if _v("0.5.13") <= v < _v("0.5.17") and inp.context_len is not None:
            pmax = min(pmax, inp.context_len)
        reserved += 1.5 * 1024 if inp.is_mla else 8 * _prefill_sizes(pmax)
    if g is not None and g > 60 * GIB:
        reserved = max(reserved, 10 * GIB)
    spec = inp.speculative_algorithm
    spec_gib = 0
    if v < _v("0.5.14") and spec is not None and spec != "NGRAM":
        spec_gib = 6 if spec == "STANDALONE" else (4 if v >= _v("0.5.10") else 2)
        reserved += spec_gib * GIB

    if v >= _v("0.5.19"):
        rule = "0.5.19+: reserve formula (arg_groups/memory_hook.py::handle_gpu_memory_settings)"
    else:
        label = ("0.5.3-0.5.9: reserve formula" if v < _v("0.5.10") else
                 "0.5.10-0.5.13: reserve + piecewise prefill graph" if v < _v("0.5.14") else
                 "0.5.14-0.5.18: reserve + cuda_graph_config, no spec reserve")
        rule = label + " (server_args.py::ServerArgs._handle_gpu_memory_settings)"
    if g is None:
        mfs, res_out = (0.88 if v < _v("0.5.20") else 0.95), None
        rule += "; gpu_mem unknown"
    else:
        mfs, res_out = round((g - reserved) / g, 3), reserved
    if spec_gib:  # "eagle draft models and cuda graphs" / "standalone draft model and cuda graphs"
        rule += f"; +{spec_gib} GiB reserve for the {spec} draft and its CUDA graphs"
    f, note = _mm_factor(inp, v)
    if inp.enable_dp_attention:  # _handle_data_parallelism runs after the reserve was computed
        chunk = chunk // dp
    return ResolvedDefaults(mfs * f, chunk, bs, res_out, rule + note)


@lru_cache(maxsize=1024)
def resolve_defaults(inp: DefaultsInput) -> ResolvedDefaults:
    """SGLang's defaults for this launch; ValueError when the version's behaviour is not known here. A pure function
    of its frozen input: computed once per input (a slider or a tune candidate that leaves them alone reuses it)."""
    v = _v(inp.version)
    if v < _v(OLDEST):
        raise ValueError(f"SGLang {inp.version} is older than {OLDEST}, the oldest release modelled here")
    if not within(v, OLDEST, NEWEST):
        raise ValueError(f"SGLang {inp.version} is newer than {NEWEST}, the newest release read")
    if inp.tp < 1 or inp.pp < 1 or inp.dp < 1:
        raise ValueError("tp, pp and dp must be >= 1")
    if v >= _v("0.5.3"):
        return _reserve_formula(inp, v)
    if v < _v("0.4.4"):
        from kvplan.engines.sglang.defaults_old import resolve_old

        return resolve_old(inp, v)
    return _legacy(inp, v)
