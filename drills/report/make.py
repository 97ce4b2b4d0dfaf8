"""Everything `drills report` does to one run directory, in one call (also used at the end of
`drills run`): junit.xml from the records, compliance summary, postmortem notes, then the rendered report — the
trend and timeline charts, summary.html, the Allure HTML with the cluster facts saved during the run, and a
screenshot of it kept as an artefact (when Chromium is there). `html=False` (`--no-html`) stops before the rendered
report: summary.md, junit.xml and the postmortems only, and `drills report` renders the rest from the records."""

from __future__ import annotations

import logging
from pathlib import Path

from drills.core.errors import DrillError
from drills.report.allure_build import build_report
from drills.report.browser import chromium_path, screenshot
from drills.report.environment import load_environment
from drills.report.junit import rewrite_junit
from drills.report.postmortem import write_postmortems
from drills.report.records import load_run, resolve_run_dir
from drills.report.summary import write_summary
from drills.report.text import slug
from drills.report.timeline_chart import timeline_png

__all__ = ["make_report"]

log = logging.getLogger(__name__)


def make_report(run: str | Path | None = None, lang: str = "en", reports_root: Path | None = None,
                environment: dict | None = None, last: int = 5, html: bool = True,
                shot: bool = True) -> dict[str, Path]:
    """Build the whole report of `run` (default `reports/latest`); returns the paths by kind:
    `summary_md`, and with `html` `summary_html`, `trend`, `html` (when there are Allure results), `screenshot`
    (`report/screenshot.png`, when Chromium rendered it); and `postmortem:<name>`.
    `environment` overrides the facts in `<run>/environment.json`."""
    run_dir = resolve_run_dir(run, reports_root)
    records = load_run(run_dir).records
    paths: dict[str, Path] = {}
    rewrite_junit(run_dir / "junit.xml", records)  # idempotent: `drills run` did it already; an older run gets it
    summary = write_summary(run_dir, lang=lang, last=last, rendered=html)
    paths.update(summary_md=summary["md"])
    if html:
        paths.update(summary_html=summary["html"], trend=summary["trend"])
    for rec in records if html else ():  # the charts are the rendered report's: `drills report` draws them later
        if rec.injected is not None:
            name = f"timeline-{slug(rec.drill)}-{slug(rec.scenario)}.png"
            timeline_png(rec, run_dir / name, lang=lang)
    for note in write_postmortems(records, run_dir, lang=lang):
        paths[f"postmortem:{note.name}"] = note
    if html:
        if (run_dir / "allure-results").is_dir():
            facts = {**load_environment(run_dir), **(environment or {})}
            paths["html"] = build_report(run_dir, lang=lang, environment=facts)
            png = _screenshot(paths["html"]) if shot else None
            if png:
                paths["screenshot"] = png
        else:
            log.warning("no allure-results in %s: summary only, no Allure HTML", run_dir)
    return paths


def _screenshot(html: Path) -> Path | None:
    """`report/screenshot.png` of the overview page; skipped (logged) without Chromium, never fatal."""
    if not chromium_path():
        log.info("chromium not installed: no report screenshot (`make bootstrap` as root installs it)")
        return None
    try:
        return screenshot(html, html.parent / "screenshot.png", timeout=60)
    except (DrillError, OSError) as err:
        log.warning("report screenshot not taken: %s", err)
        return None
