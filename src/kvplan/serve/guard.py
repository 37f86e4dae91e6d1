"""What the page may make kvplan read: the catalog's models (resolved as ``check`` resolves them) or a pasted
config.json, never a path. The launch command's model must be a catalog name unless a config is pasted, and its
program must be a bare name (``python``, ``vllm``), since a path would make kvplan list that environment's
site-packages."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kvplan.errors import KvplanError

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines import Engine, LaunchCommand

_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?$")


def _model(engine: Engine, cmd: LaunchCommand, version: str | None) -> str | None:
    """The launch's model; when a value the engine's argparse refuses stops the parse, the model of the command
    ``check`` plans instead (the same command without the rejected flags: kvplan.api, flag-bad-value)."""
    try:
        return engine.launch_model(cmd)
    except KvplanError:
        kept = engine.without_rejected(cmd, version or engine.default_version()[0])
        if kept is None:
            raise
        return engine.launch_model(kept)


def check_reads(engine: Engine, cmd: LaunchCommand, has_config: bool, version: str | None = None) -> None:
    from kvplan.models.catalog import catalog_entry

    if "/" in cmd.program[0]:
        raise KvplanError(f"the page does not look into {cmd.program[0]!r}",
                          "start the command with a bare program name (python, vllm, sglang)")
    model = _model(engine, cmd, version)
    if has_config or not model:  # no model: the engine's own one-line error, no file read
        return
    if not _REPO_RE.match(model) or ".." in model or catalog_entry(model) is None:
        raise KvplanError(f"the page plans models of the catalog or a pasted config.json; {model[:120]!r} is not in "
                          "the catalog", "paste the model's config.json into the page (kvplan models lists the "
                          "catalog)")
