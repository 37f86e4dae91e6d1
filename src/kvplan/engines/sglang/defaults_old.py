"""SGLang 0.3.0 .. 0.4.3.post4 defaults: mem_fraction_static, chunked_prefill_size, decode CUDA-graph max bs.

Read from every released wheel in the range (0.3.0, 0.3.1, 0.3.1.post1-3, 0.3.2, 0.3.3(.post1), 0.3.4(.post1-2),
0.3.5(.post1-2), 0.3.6(.post1-3), 0.4.0(.post1-2), 0.4.1(.post1-7), 0.4.2(.post1-4), 0.4.3(.post1-4)).
All of it is in ``server_args.py::ServerArgs.__post_init__`` and the dataclass field defaults, e.g.
https://github.com/sgl-project/sglang/blob/v0.3.0/python/sglang/srt/server_args.py and
https://github.com/sgl-project/sglang/blob/v0.4.3.post4/python/sglang/srt/server_args.py

mem_fraction_static (tp_size only; no GPU-size term before 0.4.5.post3):
    tp >= 16: 0.79; tp >= 8: 0.83 (0.3.0-0.3.5.post2), 0.82 (0.3.6-0.3.6.post3), 0.81 (0.4.0+);
    tp >= 4: 0.85; tp >= 2: 0.87; else 0.88
VLM: ``model_runner.py::ModelRunner.__init__`` multiplies by 0.95 from 0.3.5 (``self.mem_fraction_static``, so
also an explicit value); 0.3.0-0.3.4.post2 multiplied ``server_args.mem_fraction_static`` after ModelRunner had
copied it, so the KV sizing never saw the factor.
chunked_prefill_size: field default 8192 (<0.4.0); 0.3.5.post2-0.3.6.post3 divide it by 4 when nvidia-smi
memory.total < 25,000 MiB (also an explicit value); 0.4.0+: None -> 2048 below 25,000 MiB else 8192.
cuda_graph_max_bs: no field before 0.3.5 (capture list [1, 2, 4, 8 .. 160]); field default 160 in 0.3.5-0.3.6;
0.3.5.post2-0.3.6.post3 set 4 below 25,000 MiB; 0.4.0: 8 below 25,000 MiB else 160; 0.4.0.post1+: below
25,000 MiB 8 for tp < 4 else 80. DP attention (0.3.6+): chunk // 2, and max bs min(.., 96) in 0.3.6-0.4.0.post1.
"""

from __future__ import annotations

from kvplan.engines.sglang.defaults_io import DefaultsInput, ResolvedDefaults
from kvplan.engines.versions import Version

SMALL_GPU_MIB = 25_000  # the threshold these versions compare nvidia-smi memory.total (MiB) with


def _v(text: str) -> Version:
    return Version(text)


def tp_table_old(tp: int, v: Version) -> float:
    """server_args.py::ServerArgs.__post_init__ 0.3.0-0.4.3.post4: the tp_size table."""
    tp8 = 0.83 if v < _v("0.3.6") else 0.82 if v < _v("0.4.0") else 0.81
    return 0.79 if tp >= 16 else tp8 if tp >= 8 else 0.85 if tp >= 4 else 0.87 if tp >= 2 else 0.88


def _decode_max_bs(cap: int, padding_off: bool) -> int:
    """cuda_graph_runner.py::CudaGraphRunner.__init__: the largest capture size <= cap."""
    sizes = (list(range(1, 33)) + [64, 128]) if padding_off else [1, 2, 4] + [i * 8 for i in range(1, 21)]
    return max([b for b in sizes if b <= cap] or [min(sizes)])


def resolve_old(inp: DefaultsInput, v: Version) -> ResolvedDefaults:
    g, tp = inp.gpu_mem_mib, inp.tp
    small = g is not None and g < SMALL_GPU_MIB
    notes = []
    mfs = tp_table_old(tp, v)
    if v < _v("0.4.0"):
        chunk = 8192 if inp.chunked_prefill_size is None else inp.chunked_prefill_size
        cap = 160
        if _v("0.3.5.post2") <= v and small:
            chunk = chunk // 4 if chunk and chunk > 0 else chunk
            cap = 4
        elif inp.cuda_graph_max_bs is not None and v >= _v("0.3.5"):
            cap = inp.cuda_graph_max_bs
    else:
        chunk = inp.chunked_prefill_size if inp.chunked_prefill_size is not None else (2048 if small else 8192)
        if inp.cuda_graph_max_bs is not None:
            cap = inp.cuda_graph_max_bs
        elif small:
            cap = 8 if (v < _v("0.4.0.post1") or tp < 4) else 80
        else:
            cap = 160
    if g is None:
        notes.append("; gpu_mem unknown (taken as >= 25,000 MiB)")
    if inp.enable_dp_attention and v >= _v("0.3.6"):
        chunk = chunk // 2 if chunk and chunk > 0 else chunk
        if v < _v("0.4.0.post2"):
            cap = min(cap, 96)
    factor = 1.0
    if inp.is_multimodal and v >= _v("0.3.5"):
        factor = 0.95
        notes.append("; VLM x0.95 (model_runner, also applies to an explicit value)")
    # 0.4.1.post4+: EAGLE sets disable_cuda_graph_padding (0.4.3.post4 keeps it); the padding-off capture list
    padding_off = inp.speculative_algorithm is not None and v >= _v("0.4.1.post4")
    tp8 = "0.83" if v < _v("0.3.6") else "0.82" if v < _v("0.4.0") else "0.81"
    rule = (f"0.3.0-0.4.3: tp table (tp>=8 {tp8}) (server_args.py::ServerArgs.__post_init__)" + "".join(notes))
    return ResolvedDefaults(mfs * factor, int(chunk if chunk is not None else -1),
                            _decode_max_bs(cap, padding_off), None, rule)
