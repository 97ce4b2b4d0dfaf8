# WARNING: saturates the checkpoint store from every storage client running `fio --server`: each takes the
# store's bandwidth until reverted (or until `max_seconds`, fio's own limit).
"""Storage saturation in `clients` mode: fio's own client/server mode, for a store one host cannot saturate.

Each storage client runs `fio --server` (port 8765 by default; `host,port` or `ip:host,port` names another).
`start_clients(spec, …)` writes one job file per client into a files directory on the store — each client
writes in its own subdirectory: fio prefixes generated file names with the address of the host that drives
the servers, so two clients on one shared store would otherwise write the same files — and starts the
controlling `fio --client=<host> <jobfile> …` here, in its own session. It returns once every client has
created its first file (the servers write on their own mounts of the store, which this host mounts at the
same path: the drill probes it too), or stops everything and raises InjectionFailed. Reverting is
`local.stop_local(record)`: SIGTERM to the controlling fio (which tells the servers to quit, and prints
what every client did, with an "All clients" total), then the files directory is removed.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from drills.core.errors import DrillError, InjectionFailed
from drills.faults.storage.fio import fio_binary, spawn_fio
from drills.faults.storage.local import SaturationRecord, new_files_dir, start_time, stop_local
from drills.faults.storage.remote import clients_argv, render_jobfile
from drills.faults.storage.spec import JOB_NAME, SaturationSpec

__all__ = ["start_clients"]

log = logging.getLogger(__name__)


def start_clients(spec: SaturationSpec, start_timeout: float = 30.0, files_dir: str | None = None) -> SaturationRecord:
    """Start the controlling fio against `spec.clients`; returns once each client writes (wall seconds)."""
    files_dir = Path(files_dir or new_files_dir(spec))
    try:
        files_dir.mkdir(parents=True)
    except OSError as err:
        raise InjectionFailed(f"cannot create fio files under {spec.directory}: {err.strerror or err}") from None
    jobfiles, dirs = [], []
    for n, _host in enumerate(spec.clients):
        own = files_dir / f"client-{n}"
        own.mkdir()
        jobfile = files_dir / f"client-{n}.fio"
        jobfile.write_text(render_jobfile(replace(spec, directory=str(own))), encoding="utf-8")
        jobfiles.append(jobfile)
        dirs.append(own)
    output = Path(spec.output) if spec.output else files_dir / "fio.json"
    started = datetime.now(timezone.utc).isoformat()
    try:
        proc = spawn_fio(clients_argv(spec, jobfiles, output, binary=fio_binary()), output)
    except (DrillError, OSError) as err:
        shutil.rmtree(files_dir, ignore_errors=True)
        raise InjectionFailed(f"storage saturation not started: {err}") from None
    record = SaturationRecord(directory=spec.directory, files_dir=str(files_dir), pid=proc.pid, pgid=proc.pgid,
                              proc_start=start_time(proc.pid), started=started, output=str(output),
                              max_seconds=spec.max_seconds, mode="clients")
    deadline = time.monotonic() + start_timeout
    while proc.running and not all(_writing(d) for d in dirs) and time.monotonic() < deadline:
        time.sleep(0.02)
    if not proc.running or not all(_writing(d) for d in dirs):
        idle = [host for host, d in zip(spec.clients, dirs) if not _writing(d)]
        reason = (_last_line(proc.stderr, output) if not proc.running
                  else f"no I/O from {', '.join(idle)} within {start_timeout:g} s")
        stop_local(record)
        raise InjectionFailed(f"storage saturation from fio servers {', '.join(spec.clients)} did not start: {reason}",
                              changed=False)
    log.info("saturating %s from fio servers %s (controlling fio pid %d)", spec.directory, ", ".join(spec.clients),
             proc.pid)
    return record


def _writing(directory: Path) -> bool:
    """Whether a client has created a file of the saturating job (its name carries the job's name)."""
    return any(f"{JOB_NAME}." in p.name for p in directory.iterdir()) if directory.is_dir() else False


def _last_line(stderr: Path, output: Path) -> str:
    for path in (stderr, output):
        try:
            lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            continue
        if lines:
            return lines[-1][:300]
    return "fio ended at once"
