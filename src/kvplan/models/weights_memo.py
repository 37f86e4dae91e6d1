"""A bounded memo for per-rank weight estimates: one launch is planned many times (the plan, its findings' what-ifs,
diagnose's levers, tune, the planning page), and synthesizing a large MoE's tensor list takes a few hundred ms.

The key is everything the estimate reads: the model's fields and its config.json (as canonical JSON), the parsed
launch arguments (their repr: a frozen dataclass), the platform, the engine version, the stage and the GPU name.
Estimates from a checkpoint directory are not memoized here (its headers have their own cache keyed by the files'
size and mtime)."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
MAX_ENTRIES = 64
_MEMO: OrderedDict[tuple, Any] = OrderedDict()


def memo_key(engine: str, model: Any, args: Any, *rest: Any) -> tuple:
    cfg = json.dumps(getattr(model, "config", None), sort_keys=True, default=str)
    return (engine, model, cfg, repr(args), *rest)


def memoized(key: tuple | None, compute: Callable[[], T]) -> T:
    """``compute()`` once per key (None: never memoized); least recently used entries beyond MAX_ENTRIES drop."""
    if key is None:
        return compute()
    try:
        hit = _MEMO.get(key)
    except TypeError:  # an unhashable part: compute without the memo
        return compute()
    if hit is not None:
        _MEMO.move_to_end(key)
        return hit  # type: ignore[no-any-return]
    value = compute()
    _MEMO[key] = value
    if len(_MEMO) > MAX_ENTRIES:
        _MEMO.popitem(last=False)
    return value
