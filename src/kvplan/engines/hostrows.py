"""Host-ledger rows that more than one engine writes the same way (``kvplan.hostmem`` types): the checkpoint in the
page cache while the weights load, a checkpoint file read whole into a rank's memory, and the communicators' host
buffers between the ranks of one node.

- Page cache: ``safetensors.safe_open`` maps each checkpoint file and every rank reads its tensors through the map
  (SGLang 0.5.9 ``model_loader/weight_utils.py::safetensors_weights_iterator``, vLLM's default lazy strategy): the
  node's page cache holds the files once, clean and reclaimable, so the row is shown and never added to a peak.
- A file read whole (SGLang ``--weight-loader-disable-mmap``: ``safetensors.torch.load(f.read())``; vLLM
  ``--safetensors-load-strategy eager``): per rank, the file's bytes and the tensors made from them, one file at a
  time. The shard size is not in config.json: 5 GB is transformers' ``save_pretrained`` default ``max_shard_size``
  (https://huggingface.co/docs/transformers/main_classes/model#transformers.PreTrainedModel.save_pretrained),
  1-10 GB the range of published checkpoints.
- NCCL between the node's ranks: each channel to each peer has a ``NCCL_BUFFSIZE`` buffer, 4 MiB by default
  (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-buffsize); the SHM transport keeps it in
  host shared memory (/dev/shm/nccl-*), P2P and NVLink in GPU memory. GeForce cards have no P2P: 2-32 channels
  (NCCL_MIN/MAX_NCHANNELS), 4 assumed; PCIe cards with P2P fall back to SHM when P2P is off (NCCL_P2P_DISABLE, an
  IOMMU): 0 assumed, that fallback the high end; NVSwitch boards: 0.
"""

from __future__ import annotations

from kvplan import hostmem as hm
from kvplan.hardware.links import link_class
from kvplan.units import GB, MiB

NCCL_BUFFSIZE = 4 * MiB
NCCL_MAX_CHANNELS = 32
SHARD = hm.Calibration(5 * GB, 1 * GB, 10 * GB, "transformers save_pretrained max_shard_size default 5GB; "
                       "1-10 GB in published checkpoints")


def page_cache_row(checkpoint_bytes: int, how: str) -> hm.LedgerRow:
    return hm.row("weights-page-cache", f"checkpoint in the page cache while loading ({how})",
                  "per node (the files once, read by every rank)", 1, checkpoint_bytes, phases=(hm.LOADING,),
                  memory=hm.PAGE_CACHE, certainty=hm.ESTIMATE,
                  source="safetensors safe_open maps each file; clean file pages the kernel reclaims under "
                         "pressure (listed, not in the peak)")


def whole_file_row(ranks: int, flag: str, source: str) -> hm.LedgerRow:
    """Each rank holds one checkpoint file read whole and the tensors made from it (2 × a shard)."""
    c = SHARD
    return hm.row("weights-file-read", f"checkpoint file read whole ({flag}): the file + its tensors", "per rank",
                  ranks, int(2 * c.value), int(2 * c.low), int(2 * c.high), phases=(hm.LOADING,),
                  certainty=hm.ESTIMATE, source=f"{source}; shard {c.source}")


def nccl_row(gpu_name: str | None, ranks: int) -> hm.LedgerRow | None:
    """Each rank's NCCL buffers in host memory toward its peers on the node (None: one rank, no peer)."""
    if ranks <= 1:
        return None
    peers = ranks - 1
    link = link_class(gpu_name)[1]
    shm_max = peers * NCCL_MAX_CHANNELS * NCCL_BUFFSIZE
    if link == "geforce":
        value, low, high, how = peers * 4 * NCCL_BUFFSIZE, peers * 2 * NCCL_BUFFSIZE, shm_max, "SHM transport (no P2P)"
    elif link == "nvswitch":
        value = low = high = 0
        how = "NVLink: buffers in GPU memory"
    else:
        value, low, high, how = 0, 0, shm_max, f"{link}: P2P buffers in GPU memory; SHM if P2P is off"
    return hm.row("nccl", f"NCCL buffers toward {peers} peer(s) ({how})", "per rank", ranks, value, low, high,
                  memory=hm.SHMEM, certainty=hm.ESTIMATE,
                  source="NCCL_BUFFSIZE 4 MiB per channel and peer (NCCL env docs); 0-32 channels")


def feature_host_rows(terms, ranks: int) -> list[hm.LedgerRow]:
    """The host-side feature terms of a plan (``per_rank.feature_terms`` in host memory: LoRA adapters held on the
    CPU, PD's metadata buffers), one ledger row each, per rank, priced here once; a worst-case term (adapters whose
    files were not read) ranges from 0 to its bound."""
    return [hm.row(t.term.replace("_", "-"), t.counted if t.certainty == hm.WORST else t.what, t.scope, ranks,
                   t.bytes, 0 if t.certainty == hm.WORST else t.bytes, t.bytes, phases=(hm.STEADY,),
                   certainty=hm.WORST if t.certainty == hm.WORST else hm.EXACT, source=t.source)
            for t in terms if t.memory == "host"]
