"""Regenerate the README's picture: the incident's report (``kvplan check --example --html``) in headless Chromium,
the header and both charts, as a PNG.

    python scripts/report_screenshot.py [docs/incident-report.png]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(out: str = "docs/incident-report.png") -> int:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.html"
        subprocess.run([sys.executable, "-m", "kvplan", "check", "--example", "--html", str(report)],
                       capture_output=True, check=False)
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(str(Path(tmp) / "profile"), executable_path="/usr/bin/chromium",
                                                       headless=True, args=FLAGS,
                                                       viewport={"width": 1040, "height": 900})
            ctx.set_offline(True)
            page = ctx.new_page()
            page.goto(report.as_uri())
            box = page.locator("#host-chart-section").bounding_box()
            page.screenshot(path=out, full_page=True,
                            clip={"x": 0, "y": 0, "width": 1040, "height": box["y"] + box["height"] + 10})
            ctx.close()
    print(f"{out}: {Path(out).stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
