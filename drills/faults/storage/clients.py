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

Stopping the controlling fio is not stopping the servers' jobs: a controlling fio that is killed (SIGKILL after
its grace, the OOM killer) tells no server to quit, and each server's job runs on to its time limit, writing into
files the revert has unlinked — invisible in any listing, still taking the store's bandwidth (seen with fio 3.33:
~850 MB/s into a `(deleted)` file after the client's SIGKILL and `rm -rf`). `servers_ended(record, clients)` is
what the read-back can know: the controlling fio's report holds every client's results (each server ended its
job and answered), or fio's own time limit has passed since the start; otherwise the end is not confirmed.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from drills.core.errors import DrillError, InjectionFailed
from drills.faults.storage.fio import fio_binary, spawn_fio
from drills.faults.storage.local import SaturationRecord, new_files_dir, start_time, stop_local
from drills.faults.storage.remote import clients_argv, render_jobfile
from drills.faults.storage.spec import JOB_NAME, SaturationSpec

__all__ = ["start_clients", "servers_ended"]

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


def servers_ended(record: dict | None, clients: int) -> tuple[bool, str, str]:
    """(confirmed, what was read, where) for the fio servers' jobs of a clients-mode saturation: confirmed when the
    controlling fio's report holds the results of all `clients` servers, or their time limit (`max_seconds` from
    `started`, wall clock: fio's own runtime) has passed; never from the controlling fio's absence alone."""
    if not record:
        return False, "not confirmed: no record of the controlling fio (its report and start are unknown)", "journal"
    output = str(record.get("output") or "")
    answered = _clients_in_report(Path(output)) if output else None
    if answered is not None and answered >= clients:
        return True, f"ended: the controlling fio's report holds all {clients} servers' results", f"fio report {output}"
    until = datetime.fromisoformat(record["started"]) + timedelta(seconds=float(record.get("max_seconds") or 0))
    now = datetime.now(timezone.utc)
    got = "no readable report" if answered is None else f"results of {answered} of {clients} servers"
    if now >= until:
        return True, (f"ended by fio's own time limit at {until.isoformat(timespec='seconds')} (the controlling fio "
                      f"left {got})"), f"fio report {output or '(none)'}; started {record['started']} + max_seconds"
    return False, (f"not confirmed: the controlling fio left {got} (killed?); a server whose client did not tell it "
                   f"to quit writes on, into unlinked files, until {until.isoformat(timespec='seconds')} (fio's "
                   "time limit)"), f"fio report {output or '(none)'}"


def _clients_in_report(path: Path) -> int | None:
    """How many servers' results the controlling fio's JSON report holds (distinct host and port, the "All
    clients" total aside); None when there is no parsable report."""
    try:
        text = path.read_text(errors="replace")
        data = json.loads(text[text.index("{"):])
    except (OSError, ValueError):
        return None
    return len({(e.get("hostname"), e.get("port")) for e in data.get("client_stats") or []
                if e.get("jobname") != "All clients"})


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
