"""fio's JSON report → `FioResult`: per direction bandwidth, IOPS and completion-latency percentiles.

Handles standalone output (`jobs`), client/server output (`client_stats`, preferring the "All clients"
total), and text fio puts before the JSON (a termination notice, a server's banner). Older fio (axboe/fio
stat.c history): no `bw_bytes` before 3.2 (`bw` is KiB/s), `io_bytes` in KiB before 2.21 (which added
`io_kbytes`), `clat` in µs before 2.99 (`clat_ns` after), no sample count `N` before 3.18.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from drills.core.errors import DrillError

__all__ = ["FioResult", "DirectionStats", "DiskUtil", "parse_fio_output", "sum_results"]

NS = 1e-9


@dataclass(frozen=True)
class DirectionStats:
    """One direction (read or write) summed over the jobs; latencies in seconds."""

    io_bytes: int = 0
    bw_bytes_s: float = 0.0
    iops: float = 0.0
    runtime_s: float = 0.0
    clat_mean_s: float | None = None
    clat_p50_s: float | None = None
    clat_p99_s: float | None = None
    clat_p999_s: float | None = None


@dataclass(frozen=True)
class DiskUtil:
    name: str
    util_pct: float


@dataclass(frozen=True)
class FioResult:
    """What fio measured. Several job entries are summed; their percentiles are the worst entry's."""

    read: DirectionStats
    write: DirectionStats
    runtime_s: float
    disk_util: tuple[DiskUtil, ...]
    fio_version: str
    jobs: tuple[str, ...]
    job_errors: tuple[int, ...]
    raw: dict = field(repr=False, compare=False, hash=False)

    @property
    def total_bw_bytes_s(self) -> float:
        return self.read.bw_bytes_s + self.write.bw_bytes_s

    def summary(self) -> dict[str, Any]:
        """Everything but the raw JSON: small enough for a record or an attachment title."""
        out = asdict(self)
        out.pop("raw")
        out["total_bw_bytes_s"] = self.total_bw_bytes_s
        return out


def parse_fio_output(text: str | dict) -> FioResult:
    """Parse fio's JSON (standalone `jobs` or client/server `client_stats`); text before it is skipped."""
    data = text if isinstance(text, dict) else _load_json(text)
    entries = data.get("jobs") or data.get("client_stats") or []
    totals = [e for e in entries if e.get("jobname") == "All clients"]
    entries = totals or entries
    if not entries:
        raise DrillError("fio report has no job results")
    disks = tuple(DiskUtil(d.get("name", "?"), float(d.get("util", 0.0))) for d in data.get("disk_util", []))
    read, write = _direction(entries, "read"), _direction(entries, "write")
    return FioResult(
        read=read,
        write=write,
        # job_runtime sums over grouped jobs; the direction runtimes are elapsed time
        runtime_s=max(read.runtime_s, write.runtime_s),
        disk_util=disks,
        fio_version=str(data.get("fio version", "")),
        jobs=tuple(str(e.get("jobname", "")) for e in entries),
        job_errors=tuple(int(e.get("error", 0)) for e in entries),
        raw=data,
    )


def sum_results(results: list[FioResult]) -> FioResult:
    """Several fio reports of one saturation (a Job's pods, each its own fio) as one: bandwidth, IOPS and
    bytes add up, runtime is the longest, a latency percentile the worst of them — as fio itself sums its
    clients. Each report counts once: its "All clients" total when it has one, else its jobs."""
    if not results:
        raise DrillError("no fio report to sum")
    if len(results) == 1:
        return results[0]
    entries = []
    for n, result in enumerate(results, 1):
        raw = result.raw
        own = raw.get("jobs") or raw.get("client_stats") or []
        chosen = [e for e in own if e.get("jobname") == "All clients"] or own
        entries += [{**e, "jobname": f"{e.get('jobname', '')} #{n}"} for e in chosen]  # one entry per report
    versions = sorted({r.fio_version for r in results if r.fio_version})
    disks = [{"name": d.name, "util": d.util_pct} for r in results for d in r.disk_util]
    return parse_fio_output({"jobs": entries, "fio version": ", ".join(versions), "disk_util": disks})


# helpers

def _load_json(text: str) -> dict:
    start = text.find("{")
    if start < 0:
        raise DrillError("fio report is not JSON: " + (text.strip().splitlines() or ["(empty)"])[-1][:200])
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except json.JSONDecodeError as err:
        raise DrillError(f"fio report is not valid JSON ({err.msg} at char {err.pos})") from None


def _direction(entries: list[dict], key: str) -> DirectionStats:
    parts = [e.get(key) or {} for e in entries]
    clats = [_clat(p) for p in parts]
    mean = None
    weights = [n for n, _, _ in clats]
    if all(w is not None for w in weights) and sum(weights):
        mean = sum(c.get("mean", 0.0) * n * scale for n, c, scale in clats) / sum(weights)
    return DirectionStats(
        io_bytes=sum(_io_bytes(p) for p in parts),
        bw_bytes_s=float(sum(p["bw_bytes"] if "bw_bytes" in p else p.get("bw", 0) * 1024 for p in parts)),
        iops=float(sum(p.get("iops", 0.0) for p in parts)),
        runtime_s=max(float(p.get("runtime", 0)) for p in parts) / 1000.0,
        clat_mean_s=mean,
        clat_p50_s=_percentile(clats, 50.0),
        clat_p99_s=_percentile(clats, 99.0),
        clat_p999_s=_percentile(clats, 99.9),
    )


def _io_bytes(part: dict) -> int:
    """Bytes moved; fio before 2.21 printed KiB under `io_bytes` (and no `io_kbytes`)."""
    value = int(part.get("io_bytes", 0))
    return value * 1024 if "io_kbytes" not in part and "clat_ns" not in part else value


def _clat(part: dict) -> tuple[float | None, dict, float]:
    """(samples, completion-latency stats, seconds per unit). Samples: `N` (fio 3.18+), else `total_ios`; an
    entry that moved nothing counts 0; None when neither is printed (fio 2.x): unknown."""
    clat, scale = (part["clat_ns"], NS) if "clat_ns" in part else (part.get("clat") or {}, 1e-6)
    if "N" in clat:
        return float(clat["N"]), clat, scale
    if "total_ios" in part:
        return float(part["total_ios"]), clat, scale
    return (None if _io_bytes(part) else 0.0), clat, scale


def _percentile(clats: list[tuple[float | None, dict, float]], pct: float) -> float | None:
    """The worst entry's clat percentile, in seconds (None when no I/O went that way)."""
    values = []
    for n, clat, scale in clats:
        if n == 0:
            continue
        for k, v in (clat.get("percentile") or {}).items():
            if abs(float(k) - pct) < 1e-6:
                values.append(float(v) * scale)
    return max(values) if values else None
