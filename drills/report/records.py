"""Read drill records (`records.jsonl`, one JSON object per scenario) for one run and across runs.

Records are written by the drill engine; the report only reads them. Runs are ordered by when they
started (earliest `wall_started` of their records, else earliest `started`, else the file's mtime), so
"previous run" and "the last N runs" mean the same thing everywhere in the report.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from drills.core.errors import DrillError

__all__ = ["Run", "load_records", "load_run", "run_history", "previous_run", "resolve_run_dir",
           "phase_offsets", "PHASES"]

log = logging.getLogger(__name__)

PHASES = ("injected", "detected", "rescheduled", "ready", "recovered", "caught_up")


@dataclass
class Run:
    """One run directory and its records, oldest-first comparable by `started`."""

    run_id: str
    path: Path
    records: list[dict] = field(default_factory=list)
    started: datetime | None = None


def resolve_run_dir(run: str | Path | None, reports_root: Path | None = None) -> Path:
    """`None` means `reports/latest`; a bare run id means `reports/<id>`; symlinks are resolved."""
    root = Path(reports_root) if reports_root else Path("reports")
    path = Path(run) if run else root / "latest"
    if not path.exists() and run and not Path(run).is_absolute() and (root / str(run)).exists():
        path = root / str(run)
    if not path.exists():
        raise DrillError(f"no run directory at {path}: run a drill first (`make drill`) or pass RUN")
    return path.resolve()


def load_records(path: Path) -> list[dict]:
    """Parse a records.jsonl; a broken line is an error naming the file and line."""
    records = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise DrillError(f"{path}:{n}: not a JSON record ({err.msg}); fix or remove the line") from err
        if not isinstance(rec, dict) or "drill" not in rec or "verdict" not in rec:
            raise DrillError(f"{path}:{n}: a record needs at least `drill` and `verdict`")
        records.append(rec)
    return records


def load_run(run_dir: Path) -> Run:
    """The run in `run_dir`; no records.jsonl gives a run with no records (the report still builds)."""
    run_dir = Path(run_dir).resolve()
    path = run_dir / "records.jsonl"
    records = load_records(path) if path.exists() else []
    run_id = next((r["run_id"] for r in records if r.get("run_id")), run_dir.name)
    # Wall time first: `started` is cluster time, and each fresh twin's clock runs ahead by its own amount.
    starts = [t for t in (_parse_time(r.get("wall_started")) for r in records) if t] or \
        [t for t in (_parse_time(r.get("started")) for r in records) if t]
    started = min(starts) if starts else (_mtime(path) if path.exists() else None)
    return Run(run_id=run_id, path=run_dir, records=records, started=started)


def run_history(run_dir: Path, last: int | None = None) -> list[Run]:
    """This run and the runs before it in the same reports folder, oldest first, at most `last`."""
    run_dir = Path(run_dir).resolve()
    runs = []
    for child in sorted(run_dir.parent.iterdir()):
        if child.is_symlink() or not child.is_dir() or child.resolve() == run_dir:
            continue
        if (child / "records.jsonl").exists():
            runs.append(load_run(child))
    this = load_run(run_dir)
    earliest = datetime.min.replace(tzinfo=timezone.utc)
    runs = [r for r in runs if (r.started or earliest) <= (this.started or earliest)]
    runs.sort(key=lambda r: (r.started or earliest, r.run_id))
    runs.append(this)
    return runs[-last:] if last else runs


def previous_run(run_dir: Path) -> Run | None:
    """The run just before `run_dir` (the one whose Allure history we carry on), if any."""
    runs = run_history(run_dir)
    return runs[-2] if len(runs) > 1 else None


def phase_offsets(record: dict) -> dict[str, float]:
    """Seconds since `injected` for each phase the record has, in the canonical order."""
    phases = record.get("phases") or {}
    t0 = _parse_time(phases.get("injected"))
    if t0 is None:
        return {}
    offsets = {}
    for name in list(PHASES) + [p for p in phases if p not in PHASES]:
        t = _parse_time(phases.get(name))
        if t is not None:
            offsets[name] = (t - t0).total_seconds()
    return offsets


def _parse_time(value) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        log.debug("unparseable time %r", value)
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
