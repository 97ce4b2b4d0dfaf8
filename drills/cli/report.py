"""`drills report [RUN]`: rebuild the report of a run (default: reports/latest) and print where it is."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from drills.report.text import LANGS

__all__ = ["report"]

log = logging.getLogger(__name__)


def report(
    run: str = typer.Argument(None, help="Run directory or run id under reports/ (default: reports/latest)."),
    lang: str = typer.Option("en", "--lang", help=f"Report language: {' | '.join(LANGS)}."),
    last: int = typer.Option(5, "--last", min=1, help="How many runs the summary shows side by side."),
    reports_root: Path = typer.Option(Path("reports"), "--reports", help="Folder holding the runs."),
    no_html: bool = typer.Option(False, "--no-html", help="Only summary.md and the postmortems (no Java, no charts)."),
) -> None:
    """Build the compliance summary, postmortem notes and the single-file Allure HTML of a run."""
    from drills.report.make import make_report  # here: matplotlib is heavy, and every `drills twin up` loads this CLI

    paths = make_report(run, lang=lang, reports_root=reports_root, last=last, html=not no_html)
    notes = [p for k, p in paths.items() if k.startswith("postmortem:")]
    typer.echo(f"summary: {paths['summary_md']}")
    if notes:
        typer.echo(f"postmortems: {len(notes)} in {notes[0].parent}")
    if "screenshot" in paths:
        typer.echo(f"screenshot: {paths['screenshot']}")
    if "html" in paths:
        typer.echo(str(paths["html"]))
