# WARNING: saturates the checkpoint store from this host: background fio takes its bandwidth and IOPS until
# reverted (or until `max_seconds`, fio's own limit).
"""Storage saturation in `local` mode: fio runs here, in the background, against a directory (the twin's
store is a directory under the run). `start_local(spec)` starts it and returns a `SaturationRecord`;
`stop_local(record)` stops it (also from another process, from the record's `to_dict()`, or from the
files directory alone after a crash) and removes its files.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time
import uuid
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from drills.core.errors import DrillError, InjectionFailed, RevertFailed
from drills.faults.storage.fio import start_fio
from drills.faults.storage.spec import FILES_PREFIX, JOB_NAME, SaturationSpec, fio_jobs

__all__ = ["SaturationRecord", "new_files_dir", "start_local", "stop_local", "leftover_fio", "start_time"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SaturationRecord:
    """Exactly what `inject` started: enough for `revert` in this or any other process."""

    directory: str
    files_dir: str
    pid: int
    pgid: int
    proc_start: int | None  # kernel start time of the fio process: a reused pid never matches
    started: str  # ISO 8601, UTC
    output: str
    max_seconds: float
    mode: str = "local"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SaturationRecord":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def new_files_dir(spec: SaturationSpec) -> str:
    """Where a local saturation will put its files: known before `inject`, so the journal can name it."""
    return str(Path(spec.directory) / f"{FILES_PREFIX}{uuid.uuid4().hex[:12]}")


def start_local(spec: SaturationSpec, start_timeout: float = 30.0, files_dir: str | None = None) -> SaturationRecord:
    """Start background fio against `spec.directory` (local mode); returns once fio has created every job's file.

    `files_dir` (from `new_files_dir`) lets the caller journal the directory before anything starts.
    """
    if spec.mode != "local":
        hint = ("storage_job.inject_job(cluster, spec), which applies render_fio_job(spec)" if spec.mode == "job"
                else "clients_argv(spec, jobfile)")
        raise InjectionFailed(f"storage saturation mode {spec.mode!r} does not run locally: use {hint}")
    files_dir = Path(files_dir or new_files_dir(spec))
    try:
        files_dir.mkdir(parents=True)
    except OSError as err:
        raise InjectionFailed(f"cannot create fio files under {spec.directory}: {err.strerror or err}") from None
    output = Path(spec.output) if spec.output else files_dir / "fio.json"
    started = datetime.now(timezone.utc).isoformat()
    try:
        proc = start_fio(fio_jobs(spec, files_dir), output=output)
    except DrillError as err:
        shutil.rmtree(files_dir, ignore_errors=True)
        raise InjectionFailed(f"storage saturation not started: {err}") from None
    record = SaturationRecord(directory=spec.directory, files_dir=str(files_dir), pid=proc.pid, pgid=proc.pgid,
                              proc_start=_start_time(proc.pid), started=started, output=str(output),
                              max_seconds=spec.max_seconds)
    deadline = time.monotonic() + start_timeout
    while proc.running and _data_files(files_dir) < spec.numjobs and time.monotonic() < deadline:
        time.sleep(0.02)
    if not proc.running or _data_files(files_dir) < spec.numjobs:
        reason = _early_exit_reason(proc) if not proc.running else f"no I/O within {start_timeout:g} s"
        stop_local(record)
        raise InjectionFailed(f"storage saturation of {spec.directory} did not start: {reason}", changed=False)
    log.info("saturating %s with fio pid %d (%d jobs, bs %s, iodepth %d, at most %g s)",
             spec.directory, proc.pid, spec.numjobs, spec.bs, spec.iodepth, spec.max_seconds)
    return record


def stop_local(record: SaturationRecord | str, grace: float = 5.0) -> None:
    """Stop the record's fio (SIGTERM, then SIGKILL) and remove its files. Idempotent, any process.
    A files directory alone (a crash before the record was journaled) finds fio by its command line."""
    files_dir = record if isinstance(record, str) else record.files_dir
    pids = leftover_fio(record)
    for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if not pids:
            break
        for pid in pids:
            _kill(pid, sig)
        pids = _wait_gone(pids, wait_s)
    if pids:
        raise RevertFailed(f"fio pid(s) {', '.join(map(str, pids))} for {files_dir} survive SIGKILL")
    if not isinstance(record, str) and record.proc_start is not None and _start_time(record.pid) == record.proc_start:
        _wait_gone([record.pid], 0)  # an fio that ended by itself may be our unreaped child
    try:
        shutil.rmtree(files_dir)
    except FileNotFoundError:
        pass
    except OSError as err:
        raise RevertFailed(f"cannot remove fio files {files_dir}: {err.strerror or err}") from None
    log.info("storage saturation with files in %s reverted", files_dir)


def leftover_fio(record: SaturationRecord | str) -> list[int]:
    """Live fio processes of this record: its own pid (if its start time matches) and any fio whose
    command line names the record's files directory or a file in it (clients mode's job files)."""
    found = set()
    if isinstance(record, str):
        files_dir = record
    else:
        files_dir = record.files_dir
        if record.proc_start is not None and _start_time(record.pid) == record.proc_start and _alive(record.pid):
            found.add(record.pid)
    marker = f"--directory={files_dir}"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        ours = marker in argv or any(a.startswith(files_dir + "/") for a in argv[1:])  # clients: its job files
        if argv and os.path.basename(argv[0]) == "fio" and ours and _alive(int(entry.name)):
            found.add(int(entry.name))
    return sorted(found)



# helpers

def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (field 3, the state, first)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """The kernel start time of `pid` (a reused pid never matches a recorded one); None if it is gone."""
    return _start_time(pid)


def _start_time(pid: int) -> int | None:
    stat = _stat_fields(pid)
    return int(stat[19]) if stat and len(stat) > 19 else None


def _alive(pid: int) -> bool:
    stat = _stat_fields(pid)
    return bool(stat) and stat[0] not in ("Z", "X")


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait until none of `pids` is alive (reaping our own children) or the timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        for pid in pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass  # not our child: its parent (or init) reaps it
        pids = [pid for pid in pids if _alive(pid)]
        if not pids or time.monotonic() >= deadline:
            return pids
        time.sleep(0.02)


def _data_files(files_dir: Path) -> int:
    """How many of the saturating job's files fio has created (one per job; it lays them out in turn)."""
    return sum(p.name.startswith(JOB_NAME + ".") for p in files_dir.iterdir()) if files_dir.is_dir() else 0


def _early_exit_reason(proc) -> str:
    try:
        proc.result()
    except DrillError as err:
        return str(err)
    return "fio ended at once"
