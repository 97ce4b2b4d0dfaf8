"""Headless Chromium for reading a built report: the rendered DOM (after Allure's JS ran) and a
screenshot. Used by the report tests and by anyone checking a report without a display."""

from __future__ import annotations

import html as html_lib
import logging
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from drills.core.errors import DrillError

__all__ = ["chromium_path", "rendered_dom", "dom_text", "screenshot", "report_leaves"]

log = logging.getLogger(__name__)

# No network, no sync, no first-run UI: the report must render from the file alone.
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--disable-extensions", "--hide-scrollbars", "--mute-audio"]
# Virtual time lets the page's timers and promises run to completion without waiting in real time.
_BUDGET_MS = 10000


def chromium_path() -> str | None:
    """The Chromium binary (Debian `chromium`), or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def rendered_dom(page: Path, fragment: str = "", timeout: float = 120,
                 until: Callable[[str], bool] | None = None, attempts: int = 3) -> str:
    """The DOM of `page` (a file) at `#fragment` after its scripts ran, as HTML.

    `until`: render again (up to `attempts` times) until the DOM satisfies it — on a busy machine
    headless Chromium now and then dumps the page before a chart widget (Allure's Trend) is drawn.
    """
    dom = _run(page, fragment, ["--dump-dom"], timeout).stdout
    for _ in range(attempts - 1):
        if until is None or until(dom):
            break
        log.info("%s#%s not fully rendered yet: rendering again", Path(page).name, fragment)
        dom = _run(page, fragment, ["--dump-dom"], timeout).stdout
    return dom


def screenshot(page: Path, png: Path, fragment: str = "", size: str = "1400,1000",
               timeout: float = 120) -> Path:
    """A PNG of `page` at `#fragment` as rendered after its scripts ran."""
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(page, fragment, [f"--window-size={size}", f"--screenshot={png}"], timeout)
    if not png.exists():
        raise DrillError(f"chromium wrote no screenshot for {page}")
    return png


def dom_text(dom: str) -> str:
    """Visible text of a DOM dump: scripts and styles dropped, whitespace collapsed."""
    text = re.sub(r"<(script|style)\b[^>]*>.*?</\1>", " ", dom, flags=re.S | re.I)
    text = re.sub(r"<[^>]+>", " ", text)
    return re.sub(r"\s+", " ", html_lib.unescape(text)).strip()


def report_leaves(dom: str) -> dict[str, str]:
    """Test name → status ('passed', 'failed', ...) of the tree leaves of an Allure 2 page."""
    leaves = {}
    for chunk in dom.split('class="node node__leaf"')[1:]:
        name = re.search(r'class="node__name[^"]*">(.*?)</div>', chunk, re.S)
        status = re.search(r"status-icon_status_(\w+)", chunk)
        if name and status:
            leaves[html_lib.unescape(re.sub(r"<[^>]+>", "", name.group(1))).strip()] = status.group(1)
    return leaves


def _run(page: Path, fragment: str, extra: list[str], timeout: float) -> subprocess.CompletedProcess:
    binary = chromium_path()
    if not binary:
        raise DrillError("chromium not found: run `make bootstrap` as root (installs Debian chromium)")
    url = Path(page).resolve().as_uri() + (f"#{fragment}" if fragment else "")
    with tempfile.TemporaryDirectory(prefix="drills-chromium-") as profile:
        cmd = [binary, *_FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={_BUDGET_MS}",
               *extra, url]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as err:
            raise DrillError(f"chromium did not finish rendering {url} within {timeout:.0f}s") from err
    if proc.returncode != 0:
        last = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise DrillError(f"chromium failed on {url} (exit {proc.returncode}): {last[0]}")
    return proc
