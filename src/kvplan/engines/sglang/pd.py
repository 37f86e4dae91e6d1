"""What a PD-disaggregated SGLang server (``--disaggregation-mode prefill|decode``) allocates beyond a normal launch,
per rank; read from the 0.5.9 wheel (https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/...):

- ``server_args.py::_handle_pd_disaggregation`` (after ``_handle_gpu_memory_settings``, so the default
  mem_fraction_static is the normal one): a prefill server turns CUDA graphs off unless
  ``--enable-piecewise-cuda-graph``; a decode server forces the chunk cache (``disable_radix_cache = True``).
- ``model_executor/model_runner_kv_cache_mixin.py::init_memory_pool``: a decode server's req_to_token table is a
  ``disaggregation/decode.py::DecodeReqToTokenPool`` of ``size + pre_alloc_size`` rows, ``pre_alloc_size =
  2 × max_num_reqs`` when ``max_num_reqs <= 32`` (else 0): GPU, outside the static pool like the normal table.
- ``managers/scheduler.py::init_disaggregation``: ``disaggregation/utils.py::MetadataBuffers`` of
  ``2 × req_to_token_pool.size`` slots (decode) or ``2 × max_running_requests`` (prefill) on the CPU: per slot
  int32 [16] × 4 (output ids, cached tokens, logprob idx; fp32 logprob values), fp32/int32 [128] top logprobs,
  fp32 [16] top-k p, int64 [16] top-k index, uint64 [8] bootstrap room, and the hidden states [hidden] in the model
  dtype with EAGLE (fp32 [16] otherwise): 1,536 B + the hidden states.
- ``disaggregation/mooncake/conn.py::MooncakeKVManager.register_buffer_to_engine``: the transfer engine registers
  the KV pool and the metadata buffers where they are (``batch_register``), no copy.
- ``num_reserved_decode_tokens`` (512) is a reserve inside the decode KV pool (``DecodePreallocQueue``), no memory.
- ``--disaggregation-decode-enable-offload-kvcache``: ``disaggregation/decode_kvcache_offload_manager.py::
  DecodeKVCacheOffloadManager.__init__`` builds the HiCache host pool (``MHA/MLATokenToKVPoolHost`` with
  ``--hicache-ratio`` / ``--hicache-size``), planned by hicache.py; decode only (``_handle_cache_compatibility``).
  ``--enable-hierarchical-cache`` on a decode server is refused: the forced chunk cache and HiCache are "mutually
  exclusive" (``_handle_cache_compatibility`` runs after ``_handle_pd_disaggregation``; 0.5.9 and 0.5.10 read).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.versions import Version
from kvplan.errors import KvplanError
from kvplan.result import RankTerm

READ = "0.5.9"  # the wheel read; 0.5.10 ties the prefill's CUDA graphs to the piecewise-graph auto-disable rules
URL = "https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/"
REGISTERS = {"mooncake": ("Mooncake transfer engine (batch_register)",
                          "disaggregation/mooncake/conn.py MooncakeKVManager.register_buffer_to_engine"),
             "nixl": ("NIXL agent (register_memory: KV as VRAM, metadata as DRAM)",
                      "disaggregation/nixl/conn.py NixlKVManager.register_buffer_to_engine")}
META_FIXED_BYTES = 4 * 16 * 4 + 128 * 4 * 2 + 16 * 4 + 16 * 8 + 8 * 8  # per slot, beside the hidden states


@dataclass(frozen=True)
class PdGpu:
    """What the disaggregation mode changes on one rank's GPU and the terms it names."""

    prealloc_rows: int  # extra req_to_token rows (decode)
    graphs_off: bool  # a prefill server without CUDA graphs
    terms: tuple[RankTerm, ...]
    notes: tuple[str, ...]


def refuse(args, mode: str, version: str) -> None:
    """The launches ServerArgs rejects (``_handle_cache_compatibility``, 0.5.9+), as one-line errors."""
    if getattr(args, "disaggregation_decode_enable_offload_kvcache", False) and mode != "decode":
        raise KvplanError("--disaggregation-decode-enable-offload-kvcache is only supported on a decode server "
                          "(SGLang raises ValueError)", "drop it, or add --disaggregation-mode decode")
    if mode == "decode" and getattr(args, "enable_hierarchical_cache", False) and Version(version) >= Version(READ):
        raise KvplanError(f"SGLang {version} refuses --enable-hierarchical-cache on a decode server (its radix cache "
                          "is forced off: 'mutually exclusive')",
                          "use --disaggregation-decode-enable-offload-kvcache for a decode-side host tier")


def metadata_slot_bytes(hidden_size: int, dtype_bytes: int, eagle: bool) -> int:
    """Bytes of one ``MetadataBuffers`` slot (utils.py): fixed tensors + the hidden states."""
    return META_FIXED_BYTES + (hidden_size * dtype_bytes if eagle else 16 * 4)


def plan_pd(args, version: str, rows: int, cols: int, max_running: int, graph_bytes: int, hidden_size: int,
            dtype_bytes: int) -> PdGpu | None:
    """The PD terms of one rank (None for a normal launch). ``rows``: ``max_num_reqs``, the size of the
    req_to_token pool (``init_memory_pool``); ``cols``: its columns; ``max_running``: max_running_requests."""
    mode = str(getattr(args, "disaggregation_mode", "null") or "null")
    refuse(args, mode, version)
    if mode not in ("prefill", "decode"):
        return None
    eagle = str(getattr(args, "speculative_algorithm", None) or "").upper() in ("EAGLE", "EAGLE3", "NEXTN")
    backend = str(getattr(args, "disaggregation_transfer_backend", "mooncake") or "mooncake")
    terms, notes, prealloc, graphs_off = [], [], 0, False
    if Version(version) > Version(READ):
        notes.append(f"PD disaggregation terms of SGLang {version} as read from {READ} (disaggregation/*.py)")
    if mode == "decode":
        prealloc = 2 * rows if rows <= 32 else 0
        terms.append(RankTerm("pd-decode-prealloc-slots", f"DecodeReqToTokenPool: {prealloc} pre-allocated request "
                              f"rows beside the {rows} running ones (2 × max_num_reqs when it is ≤ 32, else 0), "
                              f"× {cols} int32", prealloc * cols * 4, "gpu", "in req_to_token_bytes",
                              URL + "disaggregation/decode.py DecodeReqToTokenPool.__init__"))
        slots = 2 * rows
        notes.append("PD decode: radix cache forced off (chunk cache); each admitted request keeps "
                     f"{getattr(args, 'num_reserved_decode_tokens', 512)} KV tokens in reserve for decoding "
                     "(--num-reserved-decode-tokens, a reserve inside the pool)")
    else:
        slots = 2 * max_running
        piecewise = bool(getattr(args, "enable_piecewise_cuda_graph", False))
        if Version(version) <= Version(READ) and not piecewise:
            graphs_off = True
            terms.append(RankTerm("pd-prefill-cuda-graphs-off", "a prefill server captures no CUDA graphs "
                                  f"({graph_bytes / 2**30:.2f} GiB estimate not taken)", 0, "gpu",
                                  "cuda_graph_bytes = 0", URL + "server_args.py _handle_pd_disaggregation"))
        elif not piecewise:
            notes.append(f"PD prefill on SGLang {version}: whether CUDA graphs stay on follows its piecewise-graph "
                         f"rules (not read past {READ}); the graph estimate is kept")
    slot = metadata_slot_bytes(hidden_size, dtype_bytes, eagle)
    terms.append(RankTerm("pd-metadata-buffers", f"MetadataBuffers: {slots} slots × {slot:,} B on the CPU "
                          f"({'2 × req_to_token rows' if mode == 'decode' else '2 × max_running_requests'})",
                          slots * slot, "host", "host ledger", URL + "disaggregation/utils.py MetadataBuffers"))
    if backend in REGISTERS:
        what, src = REGISTERS[backend]
        terms.append(RankTerm("pd-transfer-registration", f"{what}: the KV pool and the metadata buffers registered "
                              "in place, no copy", 0, "gpu", "none (in place)", URL + src))
    else:
        notes.append(f"PD transfer backend {backend}: its own buffers are not read (mooncake's and nixl's register "
                     "in place)")
    return PdGpu(prealloc, graphs_off, tuple(terms), tuple(notes))
