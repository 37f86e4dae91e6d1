"""Slurm batch scripts: ``#SBATCH`` directives and the engine launch in the script (``srun`` lines included).

Directives read (https://slurm.schedmd.com/sbatch.html): ``-N/--nodes``, ``--gres=gpu[:type]:N``,
``--gpus-per-node=[type:]N``, ``--gpus=[type:]N`` (whole job), ``--mem`` (per node; MB by default; ``0`` = the
whole node), ``--mem-per-gpu``. With cgroup enforcement (``ConstrainRAMSpace``) ``--mem`` is the limit that
OOM-kills. ``$SLURM_NNODES`` / ``$SLURM_JOB_NUM_NODES`` / ``$SLURM_NODEID`` are substituted with the job's own
values (node 0).
"""

from __future__ import annotations

import re

from kvplan import shellwords, validate
from kvplan.deploy import images
from kvplan.deploy.model import Container
from kvplan.deploy.quantity import slurm_mem_bytes
from kvplan.deploy.shell import find_in_script
from kvplan.errors import KvplanError

_DIRECTIVE = re.compile(r"^#SBATCH\s+(.*)$")


def is_sbatch(text: str) -> bool:
    return any(_DIRECTIVE.match(line.strip()) for line in text.splitlines()[:400])


def _count(name: str, text: str) -> int:
    return validate.count(f"#SBATCH {name}", text, 0, validate.MAX_RANKS)


def _gpu_spec(value: str, name: str) -> tuple[str | None, int | None]:
    """``gpu:h100:8`` / ``h100:8`` / ``8`` -> (type, count)."""
    parts = [p for p in value.split(",")[0].split(":") if p]
    if parts and parts[0] == "gpu":
        parts = parts[1:]
    count = _count(name, parts[-1]) if parts and parts[-1].isdigit() else None
    typ = parts[0] if len(parts) == 2 or (parts and not parts[0].isdigit()) else None
    return typ, count


def from_sbatch(text: str, source: str) -> Container:
    opts: dict[str, str] = {}
    for line in text.splitlines():
        m = _DIRECTIVE.match(line.strip())
        if not m:
            continue
        try:
            toks = shellwords.split(m.group(1), comments=True)
        except ValueError:
            continue
        i = 0
        while i < len(toks):
            name, eq, val = toks[i].partition("=")
            if not eq and i + 1 < len(toks) and not toks[i + 1].startswith("-"):
                val = toks[i + 1]
                i += 1
            opts[{"-N": "--nodes", "-G": "--gpus"}.get(name, name)] = val
            i += 1
    nodes_txt = opts.get("--nodes", "1").split("-")[0]
    nodes = max(1, _count("--nodes", nodes_txt)) if nodes_txt.isdigit() else 1
    gpu_type, gpus = None, None
    if "--gres" in opts:
        gpu_type, gpus = _gpu_spec(opts["--gres"], "--gres")
    elif "--gpus-per-node" in opts:
        gpu_type, gpus = _gpu_spec(opts["--gpus-per-node"], "--gpus-per-node")
    elif "--gpus" in opts:
        gpu_type, total = _gpu_spec(opts["--gpus"], "--gpus")
        gpus = -(-total // nodes) if total else None
    notes = []
    mem, mem_src = None, None
    if "--mem" in opts:
        b = slurm_mem_bytes(opts["--mem"])
        if b:
            mem, mem_src = b, f"#SBATCH --mem={opts['--mem']} (per node)"
        else:
            notes.append("--mem=0: the whole node's memory")
    elif "--mem-per-gpu" in opts and gpus:
        mem = slurm_mem_bytes(opts["--mem-per-gpu"], "--mem-per-gpu") * gpus
        mem_src = f"#SBATCH --mem-per-gpu={opts['--mem-per-gpu']} × {gpus} GPUs"
    env = {"SLURM_NNODES": str(nodes), "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_NODEID": "0", "SLURM_PROCID": "0",
           "SLURM_LOCALID": "0"}
    if gpus:
        env["SLURM_GPUS_ON_NODE"] = str(gpus)
    hit = find_in_script(text, env)
    if hit is None:
        raise KvplanError(f"{source}: no SGLang or vLLM launch in this sbatch script",
                          "the script must run the engine (directly or through srun)")
    notes += [f"${v} is not set in the script; left as written" for v in hit.unresolved]
    return Container(source=source, workload="sbatch job", name=opts.get("--job-name") or opts.get("-J") or "job",
                     argv=tuple(images.with_engine_env(hit.argv, hit.env)), env=hit.env, memory_limit_bytes=mem,
                     memory_limit_source=mem_src, shm_bytes=None, shm_source="the node's /dev/shm", gpus=gpus,
                     gpu_product=gpu_type, nodes=nodes, notes=tuple(notes))
