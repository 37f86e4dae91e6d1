"""HTML reports: one self-contained file per command (no script or style from the network), with hand-built SVG
charts laid out in Python and printed by jinja2 templates.

    write_html(kind, data, path) -> Path    kind: check | plan | explain | diagnose | fleet (simulate: add a view)
    render_html(kind, data) -> str

``data`` is the command's stable JSON dict (``CheckResult.to_dict()``, ``ExplainResult.to_dict()``,
``DiagnoseResult.to_dict()``), never an internal object: the JSON keys are the contract.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

KINDS = ("check", "plan", "explain", "diagnose", "fleet")


def render_html(kind: str, data: dict[str, Any]) -> str:
    from kvplan.report.html.deps import require
    from kvplan.report.html.render import render_page

    require("html", "--html")
    return render_page(kind, data)


def write_html(kind: str, data: dict[str, Any], path: str | Path) -> Path:
    """Render and write the report; a one-line KvplanError when the file cannot be written."""
    from pathlib import Path

    from kvplan.errors import KvplanError

    if kind not in KINDS:
        raise KvplanError(f"no HTML report for {kind!r}", f"one of: {', '.join(KINDS)}")
    from kvplan import validate

    p = Path(os.path.expanduser(validate.output_file("--html", str(path), hint="pass a writable --html FILE")))
    html = render_html(kind, data)
    import stat

    try:  # never blocks on a FIFO that appeared since the check; a regular file only
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise KvplanError(f"--html {p} is not a regular file", "pass a writable --html FILE")
            os.ftruncate(fd, 0)
            os.set_blocking(fd, True)
            with os.fdopen(fd, "w", encoding="utf-8", closefd=False) as f:
                f.write(html)
        finally:
            os.close(fd)
    except OSError as e:
        raise KvplanError(f"cannot write the HTML report {p}: {e.strerror}", "pass a writable --html FILE") from None
    print(f"kvplan: HTML report written to {p} ({len(html.encode()) / 1024:,.0f} KiB)", file=sys.stderr)
    return p


def check_html_deps(path: str | None) -> None:
    """Fail before any work when --html is given and jinja2 is missing (one line, with the pip command)."""
    if path:
        from kvplan.report.html.deps import require

        require("html", "--html")
