"""The storage drill's chart: bandwidth and latency of the checkpoint probe at baseline and under fio,
with fio's own figures beside them — one PNG a reviewer reads at a glance."""

from __future__ import annotations

import logging
from pathlib import Path

from drills.report.timeline_chart import new_figure, save_figure

__all__ = ["storage_png"]

log = logging.getLogger(__name__)


def storage_png(figures: dict, path: Path) -> Path:
    """`figures`: probe_baseline / probe_saturated (ProbeSeries.to_dict()), fio (FioResult.summary() or None)."""
    base, sat, fio = figures.get("probe_baseline") or {}, figures.get("probe_saturated") or {}, figures.get("fio")
    fig, (bw, lat) = new_figure((9, 3.4), 1, 2)
    labels = ["probe save", "probe load"]
    x = range(len(labels))
    bw.bar([i - 0.2 for i in x], [base.get("write_mb_s", 0), base.get("read_mb_s", 0)], 0.4, label="baseline",
           color="#6c8ebf")
    bw.bar([i + 0.2 for i in x], [sat.get("write_mb_s", 0), sat.get("read_mb_s", 0)], 0.4, label="under fio",
           color="#d79b00")
    ticks, names = list(x), list(labels)
    if fio:
        fio_mb = (fio.get("total_bw_bytes_s") or 0) / 1e6
        bw.bar([len(labels)], [fio_mb], 0.4, label="fio", color="#82b366")
        ticks.append(len(labels))
        names.append("fio (read+write)")
    bw.set_xticks(ticks, names, fontsize=8)
    bw.set_ylabel("MB/s")
    bw.set_title("bandwidth", fontsize=10)
    bw.legend(fontsize=8)
    lat_names = ["probe save (s)"]
    lat.bar([-0.2], [base.get("write_s", 0)], 0.4, color="#6c8ebf", label="baseline")
    lat.bar([0.2], [sat.get("write_s", 0)], 0.4, color="#d79b00", label="under fio")
    if fio:
        p99 = ((fio.get("write") or {}).get("clat_p99_s") or (fio.get("read") or {}).get("clat_p99_s") or 0)
        lat.bar([1], [p99], 0.4, color="#82b366", label="fio clat p99")
        lat_names.append("fio clat p99 (s)")
    lat.set_xticks(range(len(lat_names)), lat_names, fontsize=8)
    lat.set_title("latency", fontsize=10)
    lat.legend(fontsize=8)
    return save_figure(fig, path)
