"""Read drill records (`records.jsonl`, one JSON object per scenario) for one run and across runs.

Records are written by the drill engine; the report only reads them, as typed `Record`s
(drills.core.record). `run.json` says what kind of run it was: a dry run (`--dry-run` or
`safety.dry_run`) injected nothing, so it is never a point of the trend, the history Allure carries on, or
a score — whatever records a precondition left in it. Runs are ordered by when they
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
from drills.core.record import Record

__all__ = ["Run", "RUN_FILE", "load_records", "load_run", "run_history", "previous_run", "resolve_run_dir"]

log = logging.getLogger(__name__)

RUN_FILE = "run.json"  # {"dry_run": bool}, written by `drills run` when the run starts


@dataclass
class Run:
    """One run directory and its records, oldest-first comparable by `started`."""

    run_id: str
    path: Path
    records: list[Record] = field(default_factory=list)
    started: datetime | None = None
    dry_run: bool = False  # it injected nothing: not a point of any trend, never scored


def resolve_run_dir(run: str | Path | None, reports_root: Path | None = None) -> Path:
    """`None` means `reports/latest`; a bare run id means `reports/<id>`; symlinks are resolved."""
    root = Path(reports_root) if reports_root else Path("reports")
    path = Path(run) if run else root / "latest"
    if not path.exists() and run and not Path(run).is_absolute() and (root / str(run)).exists():
        path = root / str(run)
    if not path.exists():
        raise DrillError(f"no run directory at {path}: run a drill first (`make drill`) or pass RUN")
    return path.resolve()


def load_records(path: Path) -> list[Record]:
    """Parse a records.jsonl; a broken line is an error naming the file and line."""
    records = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(Record.from_json(json.loads(line)))
        except json.JSONDecodeError as err:
            raise DrillError(f"{path}:{n}: not a JSON record ({err.msg}); fix or remove the line") from err
        except ValueError as err:
            raise DrillError(f"{path}:{n}: {err}; fix or remove the line") from err
    return records


def load_run(run_dir: Path) -> Run:
    """The run in `run_dir`; no records.jsonl gives a run with no records (the report still builds)."""
    run_dir = Path(run_dir).resolve()
    path = run_dir / "records.jsonl"
    records = load_records(path) if path.exists() else []
    run_id = next((r.run_id for r in records if r.run_id), run_dir.name)
    # Wall time first: `started` is cluster time, and each fresh twin's clock runs ahead by its own amount.
    starts = [r.wall_started for r in records if r.wall_started] or [r.started for r in records if r.started]
    started = min(starts) if starts else (_mtime(path) if path.exists() else None)
    return Run(run_id=run_id, path=run_dir, records=records, started=started, dry_run=_dry_run(run_dir))


def run_history(run_dir: Path, last: int | None = None) -> list[Run]:
    """This run and the runs before it in the same reports folder, oldest first, at most `last`."""
    run_dir = Path(run_dir).resolve()
    runs = []
    for child in sorted(run_dir.parent.iterdir()):
        if child.is_symlink() or not child.is_dir() or child.resolve() == run_dir:
            continue
        if (child / "records.jsonl").exists():
            run = load_run(child)
            if not run.dry_run:
                runs.append(run)
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


def _dry_run(run_dir: Path) -> bool:
    try:
        return bool(json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8")).get("dry_run"))
    except (OSError, ValueError, AttributeError):  # no run.json (older runs): a real run
        return False


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
