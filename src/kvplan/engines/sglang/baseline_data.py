"""Real SGLang logs that show the free-memory baseline T (free GPU memory per rank after distributed init).

T is "Load weight begin. avail mem=X GB" (local free memory when loading starts; SGLang's KV formula uses the
min over ranks, taken in ``init_torch_distributed``), or "Load weight end ... avail mem=A GB, mem usage=W GB" as
A + W. "Init torch distributed ends. mem usage=C GB" is the part allocated by distributed init itself
(``model_runner.py::ModelRunner.init_torch_distributed``: free before ``init_distributed_environment`` minus free
after it), so total - T - C is what the process held before (CUDA/HIP context and early allocations).
All figures GiB (SGLang's "GB"). Each point names the GPU as the log or its thread does; "assumed" marks a GPU
inferred from the capacity, and ``implied`` a T that no log printed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BaselinePoint:
    gpu: str  # as the source names it (or the assumption)
    total_mib: int  # nvidia-smi / rocm-smi memory.total of that GPU
    tp_local: int  # ranks of the launch on one node
    nodes: int
    t_gib: float  # the logged T (min over ranks when the log shows several)
    version: str
    source: str  # URL, or where the excerpt was found
    read_as: str
    link: str  # "nvswitch" | "pcie-p2p" | "geforce" | "rocm" (see baseline.py::link_class)
    platform: str  # "cuda" | "rocm"
    comm_gib: float | None = None  # "Init torch distributed ends. mem usage" (max over ranks), when printed
    implied: bool = False  # T inferred from other figures, not printed

    @property
    def total_gib(self) -> float:
        return self.total_mib / 1024

    @property
    def overhead_gib(self) -> float:
        return self.total_gib - self.t_gib


FS = "find_string index id {} (public GitHub file; the index does not expose its URL)"

POINTS: tuple[BaselinePoint, ...] = (
    BaselinePoint("NVIDIA H100 80GB HBM3 (80 GB class, likely H100)", 81559, 1, 1, 63.48 + 15.11, "~0.4.4 (2025-03)",
                  "https://github.com/sgl-project/sglang/pull/4760", "Load weight end avail 63.48 + mem usage 15.11",
                  "nvswitch", "cuda"),
    BaselinePoint("NVIDIA H100 80GB HBM3 (assumed: docs CI)", 81559, 1, 1, 78.81, "~0.4.1 (2025-01-23)",
                  "https://docs.sglang.ai/start/send_request.html", "Load weight begin. avail mem=78.81 GB",
                  "nvswitch", "cuda"),
    BaselinePoint("NVIDIA GeForce RTX 5090 (32 GB class, likely)", 32607, 1, 1, 21.96 + 8.81, "~0.4.7 (2025-06)",
                  "https://github.com/sgl-project/sglang/issues/7227", "Load weight end avail 21.96 + mem usage 8.81",
                  "geforce", "cuda"),
    BaselinePoint("96 GB class (RTX PRO 6000 / H20 / GH200: 97871-97887 MiB)", 97871, 1, 1, 94.63,
                  "2025-09-28 (GptOss bench_one_batch)", FS.format(33639436415),
                  "Init torch distributed ends. mem usage=0.00 GB; Load weight begin. avail mem=94.63 GB",
                  "pcie-p2p", "cuda", comm_gib=0.0),
    BaselinePoint("141 GB class (H200 / H20-3e)", 143771, 8, 1, 137.29, "main 2025-10-16 (~0.5.3)",
                  "https://github.com/sgl-project/sglang/pull/11716",
                  "Load weight begin. avail mem=137.29-137.52 GB over TP0-7; Init torch distributed ends. "
                  "mem usage=1.77-2.01 GB", "nvswitch", "cuda", comm_gib=2.01),
    BaselinePoint("HGX 80 GB (H100 assumed; node 'hgx-gpu-compute')", 81559, 8, 1, 77.43, "0.5.2rc2 (2025-09)",
                  FS.format(45518106035) + ": Grok2 on-prem deployment blog",
                  "Init torch distributed ends. mem usage=1.25 GB; Load weight begin. avail mem=77.43 GB (TP0)",
                  "nvswitch", "cuda", comm_gib=1.25),
    BaselinePoint("NVIDIA H200", 143771, 8, 4, 124.19 + 13.73, "~0.4.9 (2025-07), PP4 x TP8",
                  "https://github.com/sgl-project/sglang/issues/8337",
                  "bf16 run: Load weight end avail 124.19 + mem usage 13.73", "nvswitch", "cuda"),
    BaselinePoint("141 GB class (H200 / H20-3e), 2 nodes", 143771, 8, 2, 138.09, "main 2026 (MiMo-V2 fp8, TP16)",
                  FS.format(54546795741), "Load weight begin. avail mem=138.09 GB (16 ranks, NCCL Init COMPLETE)",
                  "nvswitch", "cuda"),
    BaselinePoint("NVIDIA GeForce RTX 4090", 24564, 2, 1, 19.08 + 3.76, "sglang + kt-kernel (2026-02)",
                  "https://github.com/kvcache-ai/ktransformers/issues/1870",
                  "Load weight end avail 19.08 + mem usage 3.76", "geforce", "cuda"),
    BaselinePoint("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, 8, 1, 93.9, "0.5.9 (the seeds' incident)",
                  "../shared/reference/sglang-memory.md section 8 (Kimi-K2.5 TP8 incident)",
                  "implied: the three logged observations of the incident reproduced with the per-module weights",
                  "pcie-p2p", "cuda", implied=True),
    BaselinePoint("AMD Instinct MI300X", 196592, 1, 1, 191.33, "~0.3.x ROCm (2024-10)",
                  "https://github.com/AUGMXNT/llm-tracker.info-vault/blob/main/MI300X%20Testing.md",
                  "Load weight begin. avail mem=191.33 GB", "rocm", "rocm"),
    BaselinePoint("AMD Instinct MI355X (TP1 assumed)", 294896, 1, 1, 230.2 + 56.98, "main 2026-07",
                  "https://github.com/sgl-project/sglang/pull/18263", "Load weight end avail 230.20 + mem usage 56.98",
                  "rocm", "rocm"),
    BaselinePoint("AMD Instinct MI355X", 294896, 8, 1, 193.92 + 89.58, "0.5.8.post1 ROCm",
                  FS.format(1266093507) + " (logcorpus repo-glm5-fp8-mi355x-tp8-fp8kv)",
                  "Load weight end avail 193.92 + mem usage 89.58", "rocm", "rocm"),
    BaselinePoint("AMD Instinct MI300X", 196592, 8, 1, 21.73 + 166.59, "0.4.8.post1 ROCm, DP8 DP-attention",
                  "https://github.com/sgl-project/sglang/issues/7691", "Load weight end avail 21.73 + mem usage 166.59",
                  "rocm", "rocm"),
    # ---- gathered 2026-12-01 (public issues and files; the preflight corpus's own logs left out; a B200 DP8xTP8
    # log of PR 5390 whose GPU is only inferred, and a TP8 RTX PRO 6000 line of one rank, were left out too) ----
    BaselinePoint("NVIDIA A100 80GB PCIe", 81920, 2, 1, 78.77, "0.5.8 printed (check_env)",
                  "https://github.com/sgl-project/sglang/issues/17680",
                  "Load weight begin. avail mem=78.77 GB (TP0 and TP1; topology SYS)", "pcie-p2p", "cuda"),
    BaselinePoint("NVIDIA GeForce RTX 4090 (5 cards, GPUs 0 and 2 used)", 24564, 2, 1, 22.93,
                  "0.0.0.dev11582 printed (2026-04)", FS.format(53944457073),
                  "Init torch distributed ends. mem usage=0.19 GB; Load weight begin. avail mem=22.93 GB (TP0, TP1)",
                  "geforce", "cuda", comm_gib=0.19),
    BaselinePoint("NVIDIA RTX 6000 Ada Generation", 49140, 4, 1, 46.74, "0.4.7 printed (check_env, issue 7070)",
                  "https://github.com/sgl-project/sglang/issues/7212",
                  "Init torch distributed ends. mem usage=0.19 GB; Load weight begin. avail mem=46.74 GB (TP0)",
                  "pcie-p2p", "cuda", comm_gib=0.19),
    BaselinePoint("NVIDIA RTX 5880 Ada Generation", 49140, 4, 1, 9.29 + 37.41, "~0.5.2 (2025-09-18)",
                  "https://github.com/sgl-project/sglang/issues/10618",
                  "Load weight end avail 9.29 + mem usage 37.41 (TP0)", "pcie-p2p", "cuda"),
    BaselinePoint("NVIDIA RTX PRO 6000 Blackwell (sm_120, 4 cards)", 97887, 4, 1, 94.01, "main 2026-09 (nccl 2.29.7)",
                  "https://github.com/sgl-project/sglang/issues/40558",
                  "Init torch distributed ends. mem usage=0.39 GB (TP0-3); Load weight begin. avail mem=94.01 GB",
                  "pcie-p2p", "cuda", comm_gib=0.39),
    BaselinePoint("NVIDIA L40S", 46068, 1, 1, 44.02, "v0.5.16 (image lmsysorg/sglang:v0.5.16-cu129)",
                  FS.format(57814046151) + " (IsNoobgrammer/ih-medgemma-hosting CLAUDE.md)",
                  "Load weight begin. avail mem=44.02 GB", "pcie-p2p", "cuda"),
    BaselinePoint("NVIDIA A10G (EKS g5)", 23028, 1, 1, 21.82, "v0.5.3 (stated)", FS.format(60603278615),
                  "Load weight begin. avail mem=21.82 GB", "pcie-p2p", "cuda"),
    BaselinePoint("NVIDIA GeForce RTX 3090 (Docker Desktop, WSL2)", 24576, 1, 1, 22.76, "~0.4.2 (2025-02-04)",
                  "https://github.com/jerryzsj/my-deepseek-r1", "Load weight begin. avail mem=22.76 GB (README)",
                  "geforce", "cuda"),
    BaselinePoint("NVIDIA GeForce RTX 4090", 24564, 1, 1, 3.64 + 18.82, "lmsysorg/sglang:dev (2025-03-29)",
                  "https://github.com/sgl-project/sglang/issues/4895", "Load weight end avail 3.64 + mem usage 18.82",
                  "geforce", "cuda"),
    BaselinePoint("NVIDIA GeForce RTX 5090", 32607, 1, 1, 30.68, "main 2026-10", FS.format(70468080142),
                  "31.84 - 'Load weight begin. avail mem=30.68' (CUDA context, torch, NCCL before load 1.16)",
                  "geforce", "cuda"),
    BaselinePoint("NVIDIA A100-PCIE-40GB", 40960, 1, 1, 38.87, "0.5.9 (pip pin)", FS.format(53948216720),
                  "Load weight begin. avail mem=38.87 GB", "pcie-p2p", "cuda"),
    BaselinePoint("NVIDIA H100 NVL (Azure VM)", 95830, 1, 1, 92.50, "2025-12-02", FS.format(58618580877),
                  "Load weight begin. avail mem=92.50 GB", "pcie-p2p", "cuda"),
    BaselinePoint("NVIDIA H20 (96 GB)", 97871, 8, 1, 93.56, "main 2026-05", FS.format(54684172587),
                  "Load weight begin. avail mem=93.56-93.79 GB over TP0-7 (min 93.56)", "nvswitch", "cuda"),
    BaselinePoint("80 GB class (sglang docs CI, H100 assumed)", 81559, 1, 1, 78.43, "~0.5.8 (2026-02-09)",
                  FS.format(14968382678) + " (rendered LoRA docs notebook)",
                  "Init torch distributed ends. mem usage=0.09 GB; Load weight begin. avail mem=78.43 GB",
                  "nvswitch", "cuda", comm_gib=0.09),
)
