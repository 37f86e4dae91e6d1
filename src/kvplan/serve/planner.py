"""One request → the JSON ``kvplan check --json`` prints for the effective command (and that command).

The page's model config, when pasted, is written to a private temporary directory and given as --model-config,
exactly as a user would; the directory is removed before the answer leaves.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from kvplan.serve.inputs import PlanRequest

PASTED = "pasted config.json"


def effective_command(req: PlanRequest) -> tuple[str, str]:
    """(engine name, the launch command with the sliders applied), after the read guard."""
    from kvplan.engines import detect_engine, split_command
    from kvplan.serve.guard import check_reads

    cmd = split_command(req.command)
    engine = detect_engine(cmd)
    check_reads(engine, cmd, req.model_config is not None, req.options.get("engine_version"))
    flags = engine.slider_flags(req.sliders)
    return engine.name, (engine.rewrite(cmd, flags) if flags else cmd.text())


def plan_view(req: PlanRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the JSON ``kvplan check --json`` prints for the effective command, what the page's sliders show for it)."""
    from kvplan import api
    from kvplan.engines import get_engine

    name, text = effective_command(req)
    opts = dict(req.options)
    with tempfile.TemporaryDirectory(prefix="kvplan-serve-") as tmp:
        if req.model_config is not None:
            cfg = Path(tmp) / "config.json"
            cfg.write_text(json.dumps(req.model_config), encoding="utf-8")
            opts["model_config"] = str(cfg)
        res = api.check(text, **opts)
        d = res.to_dict()
        if req.model_config is not None and isinstance(d.get("model"), dict):
            d["model"]["source"] = PASTED  # not the temporary path, which is gone
    return d, get_engine(name).slider_view(res.plan).to_dict()


def plan_json(req: PlanRequest) -> dict[str, Any]:
    return plan_view(req)[0]
