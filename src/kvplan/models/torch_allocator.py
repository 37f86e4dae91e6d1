"""What PyTorch's CUDA caching allocator reserves beyond the bytes asked for, for a sequence of allocations that are
never freed (a model's parameters, created in order): the segment tail that a free-memory drop ("Load weight end ...
mem usage" in SGLang) counts but no tensor holds.

Rules of ``c10/cuda/CUDACachingAllocator.cpp`` (https://github.com/pytorch/pytorch/blob/v2.9.0/c10/cuda/
CUDACachingAllocator.cpp: ``round_size``, ``get_allocation_size``, ``should_split``; the same code serves HIP):

- every request is rounded up to 512 B (``kMinBlockSize``);
- up to 1 MiB (``kSmallSize``) it comes from the small pool: a free cached block that fits (best fit), else a new
  2 MiB segment (``kSmallBuffer``); the rest of the block is split off when at least 512 B;
- larger requests come from the large pool: best fit among free blocks, else a new segment of 20 MiB
  (``kLargeBuffer``) for requests under 10 MiB (``kMinLargeAlloc``), else the request rounded up to 2 MiB
  (``kRoundLarge``); the rest is split off only when larger than 1 MiB.

Returns reserved − requested. The free lists stay small (one tail per segment at most), so the cost is linear in the
number of allocations for a model's few hundred to few thousand parameters.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable

MiB = 1 << 20
MIN_BLOCK = 512
SMALL_SIZE = MiB
SMALL_BUFFER = 2 * MiB
LARGE_BUFFER = 20 * MiB
MIN_LARGE_ALLOC = 10 * MiB
ROUND_LARGE = 2 * MiB


def _take(free: list[int], n: int) -> int | None:
    """Best fit: the smallest free block of at least ``n`` bytes, removed from the sorted list."""
    i = bisect_left(free, n)
    return free.pop(i) if i < len(free) else None


def reserved_overhead_bytes(sizes: Iterable[int]) -> int:
    """Bytes the caching allocator reserves beyond the requests, for allocations in this order, none freed."""
    small: list[int] = []
    large: list[int] = []
    reserved = requested = 0
    for raw in sizes:
        if raw <= 0:
            continue
        n = -(-raw // MIN_BLOCK) * MIN_BLOCK
        requested += n
        if n <= SMALL_SIZE:
            b = _take(small, n)
            if b is None:
                b = SMALL_BUFFER
                reserved += b
            if b - n >= MIN_BLOCK:
                insort(small, b - n)
        else:
            b = _take(large, n)
            if b is None:
                b = LARGE_BUFFER if n < MIN_LARGE_ALLOC else -(-n // ROUND_LARGE) * ROUND_LARGE
                reserved += b
            if b - n > SMALL_SIZE:
                insort(large, b - n)
    return reserved - requested
