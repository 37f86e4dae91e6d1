"""Process-wide bounded memos: what depends only on the model (its tensors, parameter counts, checkpoint size) and
what depends on the model and a parallel layout (the weights one rank holds) is computed once per process.

One launch is planned many times (its findings' what-ifs, the suggested command, diagnose's levers, every ``tune``
candidate, every slider move of ``kvplan serve``), and planning a trillion-parameter MoE from scratch walks
thousands of tensor groups. A ``Memo`` is keyed by everything its value depends on (the caller builds the key:
``ModelSpec.identity`` for the model, frozen dataclasses of the flags that are read, the engine version, the
platform), keeps at most ``size`` entries (the least recently used drops first) and hands out the same value to every
caller, so values are immutable (frozen dataclasses, tuples; a dict is copied by the caller before it is changed).
"""

from __future__ import annotations

from _thread import allocate_lock
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")
_MISSING = object()


class Memo(Generic[V]):
    """A bounded least-recently-used memo of ``compute()`` per key."""

    def __init__(self, name: str, size: int):
        self.name, self.size = name, size
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = allocate_lock()  # kvplan serve plans in a thread pool; compute() runs outside the lock

    def get(self, key: Hashable | None, compute: Callable[[], V]) -> V:
        """The value for ``key``, computed on the first ask (``key`` None: never memoized)."""
        if key is None:
            return compute()
        values = self._values
        try:
            with self._lock:
                hit = values.get(key, _MISSING)
                if hit is not _MISSING:
                    values.move_to_end(key)
        except TypeError:  # an unhashable part: compute without the memo
            return compute()
        if hit is not _MISSING:
            return hit  # type: ignore[return-value]
        value = compute()
        with self._lock:
            values[key] = value
            if len(values) > self.size:
                values.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        self._values.clear()

