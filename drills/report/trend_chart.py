"""Trend chart across runs: recovery time per drill, one line each, with its target as a dashed
line of the same colour; failed runs are marked with a cross."""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib

from drills.core import outcomes
from drills.core.record import Record
from drills.report.records import Run
from drills.report.text import labels
from drills.report.timeline_chart import new_figure, save_figure

__all__ = ["trend_png"]

log = logging.getLogger(__name__)


def trend_png(runs: list[Run], path: Path, lang: str = "en") -> Path:
    """Recovery seconds of every (drill, scenario) over `runs` (oldest first) into `path`."""
    words = labels(lang)
    fig, ax = new_figure((10, 3.6))
    series: dict[str, list[tuple[int, Record]]] = {}
    for i, run in enumerate(runs):
        for rec in run.records:
            series.setdefault(_key(rec), []).append((i, rec))
    palette = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, (key, points) in enumerate(sorted(series.items())):
        color = palette[n % len(palette)]
        measured = [(i, r.recovery_s) for i, r in points if r.recovery_s is not None]
        if measured:
            ax.plot([i for i, _ in measured], [v for _, v in measured], "o-", label=key,
                    color=color, linewidth=1.5, markersize=4)
        failed = [(i, r.recovery_s) for i, r in points if not outcomes.of(r).counts_as_pass and r.recovery_s is not None]
        if failed:
            ax.scatter([i for i, _ in failed], [v for _, v in failed], marker="x", s=60,
                       color="#c62828", zorder=4)
        targets = [(i, r.target_s) for i, r in points if r.target_s]
        if targets:
            ax.plot([i for i, _ in targets], [v for _, v in targets], linestyle="--", marker="_",
                    markersize=14, linewidth=1, color=color, alpha=0.7)
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([_short(r.run_id) for r in runs], rotation=20, fontsize=7, ha="right")
    ax.set_xlabel(words["run_axis"])
    ax.set_ylabel(words["recovery_axis"])
    ax.set_ylim(bottom=0)
    if ax.get_legend_handles_labels()[1]:  # a series may have no point with a recovery time
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(words["trend"], fontsize=10)
    return save_figure(fig, path)


def _key(record: Record) -> str:
    return f"{record.drill}: {record.scenario}" if record.scenario else record.drill


def _short(run_id: str) -> str:
    return run_id if len(run_id) <= 20 else run_id[:9] + "…" + run_id[-9:]
