"""Secrets never reach kvplan's files: flag values like ``--api-key X`` / ``--hf-token=X`` and environment values
whose name holds KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL are replaced by ``<redacted>`` in the state file, the
events and the report."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "<redacted>"
# the last word of the flag name: --api-key, --admin-api-key, --hf-token, --ssl-password, --client-secret
SECRET_FLAG = re.compile(r"^--?(?:[\w-]*[-_])?(?:api[-_]?key|key|token|secret|password|passwd|credentials?)$", re.I)
SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
_ENV_TOKEN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_IN_TEXT = re.compile(r"(--?(?:[\w-]*[-_])?(?:api[-_]?key|key|token|secret|password|passwd|credentials?))"
                      r"(=|\s+)(?:'[^']*'|\"[^\"]*\"|\S+)", re.I)
_ENV_IN_TEXT = re.compile(r"\b([A-Z_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Z0-9_]*)=(\S+)")


def argv(tokens: Iterable[str]) -> list[str]:
    """The command with secret values replaced (``--api-key X``, ``--api-key=X``, ``HF_TOKEN=X`` prefixes)."""
    out: list[str] = []
    hide_next = False
    for t in tokens:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _ = t.partition("=")
        if t.startswith("-") and SECRET_FLAG.match(name):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(t)
                hide_next = True
            continue
        m = _ENV_TOKEN.match(t)
        if m and not t.startswith("-") and SECRET_ENV.search(m.group(1)):
            out.append(f"{m.group(1)}={REDACTED}")
            continue
        out.append(t)
    return out


def env(values: dict[str, str]) -> dict[str, str]:
    return {k: (REDACTED if SECRET_ENV.search(k) else v) for k, v in values.items()}


def text(s: str) -> str:
    """Free text (a log line, a message) with ``--api-key X`` and ``SOME_TOKEN=X`` values hidden."""
    if not any(w in s.lower() for w in ("key", "token", "secret", "passw", "credential")):
        return s
    s = _IN_TEXT.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", s)
    return _ENV_IN_TEXT.sub(lambda m: f"{m.group(1)}={REDACTED}", s)


def obj(value: Any, depth: int = 0) -> Any:
    """Every string inside a JSON-like value through :func:`text` (events)."""
    if depth > 20:
        return value
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {k: obj(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [obj(v, depth + 1) for v in value]
    return value
