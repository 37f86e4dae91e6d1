"""kvplan: what every GPU rank and every host will allocate for an SGLang or vLLM launch.

Public API (same typed result that ``kvplan check --json`` prints)::

    from kvplan import check, plan
    result = check(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"], gpu="h100")
    result.to_dict()["per_rank"]["kv_tokens"]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["check", "plan", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.api import check, plan


def __getattr__(name: str) -> Any:
    # Lazy: `import kvplan` must stay cheap for the CLI.
    if name in ("check", "plan"):
        from kvplan import api

        return getattr(api, name)
    raise AttributeError(name)
