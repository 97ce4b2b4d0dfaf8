"""Timeline chart of one drill: its phases on a cluster-time axis (seconds since the fault was
injected), the recovery target as a vertical line, and an optional overlay series (throughput,
request rate) on a twin axis. Matplotlib's object API (`Figure`, drawn by Agg when saved as PNG): no
display, no pyplot — whose import (its backend machinery and figure manager) cost every `drills run` ~0.3-0.5 s
of CPU for nothing a file needs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from drills.core import outcomes
from drills.core.record import PHASES, Record
from drills.report.text import fmt_seconds, labels

__all__ = ["timeline_png", "new_figure", "save_figure"]

log = logging.getLogger(__name__)

# CJK glyphs come from WenQuanYi Micro Hei (Debian fonts-wqy-microhei) when installed.
_FONTS = ["DejaVu Sans", "WenQuanYi Micro Hei"]


def timeline_png(record: Record, path: Path, overlay: list[tuple[float, float]] | None = None,
                 overlay_label: str = "throughput", lang: str = "en") -> Path:
    """Draw the record's phases (and `overlay` as (t_seconds, value) points) into `path`."""
    words = labels(lang)
    offsets = record.offsets
    target = record.target_s
    fig, ax = new_figure((8, 3.4))
    # One row per phase (injected on top): phases seconds apart never overlap, and a phase that was
    # never reached shows as an empty row instead of vanishing.
    names = list(offsets)  # PHASES order
    missing = [n for n in PHASES if n not in offsets] if offsets else []
    rows = names + missing
    color = "#2e7d32" if outcomes.of(record).counts_as_pass else "#c62828"
    for y, name in enumerate(rows):
        if name in offsets:
            t = offsets[name]
            ax.plot([0, t], [y, y], "-", color="#bdbdbd", linewidth=3, solid_capstyle="butt", zorder=1)
            ax.scatter([t], [y], color=color, zorder=3, s=30)
            ax.annotate(fmt_seconds(t), (t, y), textcoords="offset points", xytext=(6, -3), fontsize=8)
        else:
            ax.annotate("—", (0, y), textcoords="offset points", xytext=(6, -3), fontsize=8, color="#9e9e9e")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    ax.set_ylim(len(rows) - 0.4 if rows else 1, -0.8)
    if target:
        ax.axvline(float(target), color="#ef6c00", linestyle="--", linewidth=1.5)
        ax.annotate(f"{words['target']} {fmt_seconds(target)}", (float(target), -0.6), ha="right",
                    fontsize=8, color="#ef6c00", xytext=(-4, 0), textcoords="offset points")
    ax.set_xlabel(words["time_axis"])
    right = max([*offsets.values(), float(target or 0), *(t for t, _ in overlay or [])], default=1.0)
    left = min([0.0, *(t for t, _ in overlay or [])])
    ax.set_xlim(left - 0.03 * (right - left) - 1, right * 1.12 + 1)
    if overlay:
        twin = ax.twinx()
        twin.plot([t for t, _ in overlay], [v for _, v in overlay], color="#1565c0", linewidth=1.2,
                  alpha=0.6)
        twin.set_ylabel(overlay_label, color="#1565c0")
        twin.set_ylim(bottom=0)
        ax.set_zorder(twin.get_zorder() + 1)  # phases above the overlay curve
        ax.patch.set_visible(False)
    ax.set_title(f"{record.drill} — {record.scenario}", fontsize=10)
    return save_figure(fig, path)


def new_figure(size: tuple[float, float], rows: int = 1, cols: int = 1, **subplots):
    """A figure and its axes (`rows` × `cols`, as `Figure.subplots`) with the report's fonts (CJK-capable) and
    a light style."""
    matplotlib.rcParams["font.family"] = _FONTS
    fig = Figure(figsize=size, dpi=100)
    axes = fig.subplots(rows, cols, **subplots)
    for ax in (axes.flat if hasattr(axes, "flat") else [axes]):
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig, axes


def save_figure(fig, path: Path) -> Path:
    """Lay out and write as PNG (a `Figure` outside pyplot is freed with its last reference)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path
