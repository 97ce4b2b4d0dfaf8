"""The load over a drill as one PNG: request rate, failures and p99 latency on a cluster-time axis
(seconds since the fault), with the drill's phases and the recovery target as vertical lines."""

from __future__ import annotations

import logging
from pathlib import Path

from drills.report.timeline_chart import new_figure, save_figure

__all__ = ["load_chart_png"]

log = logging.getLogger(__name__)

_PHASE_COLORS = {"injected": "#c62828", "rescheduled": "#6a1b9a", "ready": "#2e7d32", "recovered": "#1565c0"}


def load_chart_png(rows: list[dict], path: Path, phases: dict[str, float] | None = None,
                   target_s: float | None = None, title: str = "load over the drill") -> Path:
    """`rows`: dicts with t (cluster s since the fault), rps, fail (per second) and p99_ms; `phases`:
    phase → cluster s since the fault."""
    fig, axes = new_figure((8, 5.4), 3, 1, sharex=True)
    t = [r["t"] for r in rows]
    series = (("requests/s", [r["rps"] for r in rows], "#1565c0"),
              ("failures/s", [r["fail"] for r in rows], "#c62828"),
              ("p99 latency (ms)", [r["p99_ms"] if r["p99_ms"] is not None else float("nan") for r in rows], "#ef6c00"))
    for ax, (label, values, color) in zip(axes, series):
        ax.plot(t, values, color=color, linewidth=1.1)
        ax.set_ylabel(label, fontsize=8)
        ax.set_ylim(bottom=0)
        for name, at in (phases or {}).items():
            ax.axvline(at, color=_PHASE_COLORS.get(name, "#9e9e9e"), linestyle=":", linewidth=1)
        if target_s:
            ax.axvline(target_s, color="#ef6c00", linestyle="--", linewidth=1)
    for name, at in (phases or {}).items():
        axes[0].annotate(name, (at, 1.0), xycoords=("data", "axes fraction"), fontsize=7, rotation=90,
                         va="top", ha="right", color=_PHASE_COLORS.get(name, "#616161"))
    axes[-1].set_xlabel("cluster seconds since the fault")
    axes[0].set_title(title, fontsize=10)
    return save_figure(fig, path)
