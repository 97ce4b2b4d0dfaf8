# WARNING: saturates the checkpoint store: background fio jobs take its bandwidth and IOPS until reverted
# (or until `max_seconds`, fio's own limit), so every training job's checkpoint saves and reads slow down.
"""Storage saturation, the fault: fio floods the store so the drill can see whether checkpoint I/O still holds.

The fault contract (`plan` → `inject` → `revert`) over three modes, all from one `SaturationSpec`
(spec.py); each mode's machinery lives in its own module:

- `local` (local.py): fio runs here, in the background, against a directory (the twin's store is a directory
  under the run). `inject(spec)` starts it and returns a `SaturationRecord`; `revert(record)` stops
  it (also from another process, from the record's `to_dict()`) and removes its files.
- `job` (remote.py renders, job.py applies): on a real cluster, N pods of a Kubernetes Job run fio against the store's PVC, so the load
  comes from several nodes. `render_fio_job(spec)` renders the batch/v1 Job; each pod writes under
  its own subdirectory and removes it when fio ends or the pod is deleted — unless the container is killed
  (fio deaf to SIGTERM, a node lost): so the revert deletes the Job, waits for its pods, then reads the store
  through a pod on the same claim and removes what is left of `{mount}/.drills-fio-{job}` (sweep.py).
- `clients` (remote.py renders, clients.py runs): fio's own client/server mode, for a store that one client cannot saturate. Each storage
  client runs `fio --server` (port 8765 by default); `clients_argv(spec, jobfile)` builds the
  controlling command `fio --output-format=json --client=<host> <jobfile> --client=<host2> <jobfile>…`
  and `render_jobfile(spec)` the job file it sends. The servers write under `spec.directory` on
  their own mounts of the store (fio's `unique_filename`, on by default, prefixes each client's files
  with its address, and `unlink=1` removes them when the job ends); fio reports every client plus an
  "All clients" total, which `parse_fio_output` prefers. Reverting is stopping the controlling fio.

Every mode gives fio a time limit (`max_seconds`) so that even a crashed drill cannot leave the
store saturated for ever.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from drills.core.errors import InvalidProfile
from drills.faults import Plan, Reach
from drills.faults.readback import Observation, Reading, read
from drills.faults.storage.local import SaturationRecord, leftover_fio, new_files_dir, start_local, stop_local
from drills.faults.storage.remote import clients_argv, render_fio_job, render_jobfile
from drills.faults.storage.spec import (
    DEFAULT_IMAGE, FILES_PREFIX, JOB_NAME, LABELS, MODES, SaturationSpec, fio_jobs, saturation_spec,
)

__all__ = [
    "KIND", "plan", "inject", "revert", "verify", "revert_spec",
    # its parts (spec.py, local.py, remote.py), importable from the fault as before
    "MODES", "DEFAULT_IMAGE", "JOB_NAME", "FILES_PREFIX", "LABELS", "SaturationSpec", "SaturationRecord",
    "saturation_spec", "start_local", "stop_local", "new_files_dir", "fio_jobs", "render_fio_job",
    "render_jobfile", "clients_argv", "leftover_fio",
]

log = logging.getLogger(__name__)

KIND = "storage"


def revert_spec(spec: SaturationSpec, files_dir: str | None = None) -> dict[str, Any]:
    """What the journal keeps so `revert_entry` can undo the saturation alone, even after a crash mid-inject."""
    if spec.mode == "job":
        from drills.faults.storage.sweep import sweep_undo

        return {"mode": "job", "namespace": spec.namespace, "job_name": spec.job_name, **sweep_undo(spec)}
    if spec.mode == "clients":  # how many servers must have answered (the read-back of their jobs' end)
        return {"mode": "clients", "directory": spec.directory, "files_dir": files_dir, "clients": len(spec.clients)}
    return {"mode": spec.mode, "directory": spec.directory, "files_dir": files_dir}


def plan(target, profile, *, directory: str, output: str | None = None) -> Plan:
    """Read-only: the profile's saturation (local fio, or a fio Job in an allowed namespace) of `directory`."""
    spec = saturation_spec(profile, directory, output)
    if spec.mode == "job":
        if not spec.claim:
            raise InvalidProfile("storage.saturation.claim: job mode needs the store's PersistentVolumeClaim")
        from drills.faults.storage.sweep import files_root

        cluster = target.cluster
        where = ""
        if spec.per_node:
            from drills.faults.storage.job import selected_nodes

            nodes = selected_nodes(cluster, spec)
            spec = replace(spec, parallelism=len(nodes))
            where = f", one on each of {', '.join(nodes)}"
        return Plan(KIND, f"{spec.namespace}/{spec.job_name}",
                    f"saturate the store with fio Job {spec.namespace}/{spec.job_name} ({spec.parallelism} pods × "
                    f"{spec.numjobs} jobs, bs {spec.bs}, iodepth {spec.iodepth}{where}) on {cluster.name}; on revert, "
                    f"its files under {files_root(spec.mount_path, spec.job_name)} are read and removed",
                    revert_spec(spec), Reach(namespaces=(spec.namespace,)),
                    spec=(spec, profile.storage.saturation.start_timeout_s))
    files_dir = new_files_dir(spec)
    if spec.mode == "clients":
        if not spec.clients:
            raise InvalidProfile("storage.saturation.clients: clients mode needs the hosts running `fio --server`")
        return Plan(KIND, spec.directory,
                    f"saturate {spec.directory} from fio servers {', '.join(spec.clients)} ({spec.numjobs} jobs each "
                    f"× bs {spec.bs}, iodepth {spec.iodepth})", revert_spec(spec, files_dir), Reach(), spec=(spec, 30.0))
    return Plan(KIND, spec.directory,
                f"saturate {spec.directory} with fio ({spec.numjobs} jobs × bs {spec.bs}, iodepth {spec.iodepth})",
                revert_spec(spec, files_dir), Reach(), spec=(spec, 30.0))


def inject(target, plan: Plan) -> dict[str, Any]:
    """Start the planned saturation; the record (a dict) has `injected_at` in cluster time."""
    spec, start_timeout_s = plan.spec
    if spec.mode == "job":
        from drills.faults.storage.job import inject_job

        return inject_job(target.cluster, spec, start_timeout_s).to_dict()
    if spec.output:
        Path(spec.output).parent.mkdir(parents=True, exist_ok=True)
    if spec.mode == "clients":
        from drills.faults.storage.clients import start_clients

        record = start_clients(spec, start_timeout_s, files_dir=plan.undo["files_dir"]).to_dict()
        record["injected_at"] = target.clock.iso(target.clock.now())
        return record
    record = start_local(spec, start_timeout_s, files_dir=plan.undo["files_dir"]).to_dict()
    record["injected_at"] = target.clock.iso(target.clock.now())
    return record


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Stop fio and remove its files (or delete the Job and wait for its pods); idempotent, any process."""
    if undo.get("mode") == "job":
        from drills.faults.storage.job import revert_job
        from drills.faults.storage.sweep import delete_sweep_pods, sweep

        revert_job(target.cluster, undo["namespace"], undo["job_name"])
        delete_sweep_pods(target.cluster, undo["namespace"], undo["job_name"])  # a killed revert's, if any
        sweep(target.cluster, undo)  # the pods are gone; their files may not be (a killed fio has no trap)
        return "reverted"
    # Without a record (a crash before it was journaled) fio is found by its files directory.
    stop_local(SaturationRecord.from_dict(record) if record else undo["files_dir"])
    return "reverted"


def verify(target, undo: dict, record: dict | None = None) -> Reading:
    """Read back that the saturation is gone: no fio of its files directory and no such directory (local and
    clients modes; clients mode also every server's job confirmed ended: clients.servers_ended), or no pod of its Job and no directory of its files on the store, listed by a read-only pod
    on the store's claim (job mode: sweep.py)."""
    if undo.get("mode") == "job":
        from drills.faults.storage.job import pods_of
        from drills.faults.storage.sweep import read_leftovers

        ns, name = undo["namespace"], undo["job_name"]

        def job_reader():
            left = pods_of(target.cluster, ns, name)
            pods = Observation(f"fio Job {ns}/{name}", f"{len(left)} pod(s) left" + (f": {', '.join(left)}" if left
                                                                                    else ""),
                               f"GET pods in {ns} (job-name={name})", not left)
            files = read_leftovers(target.cluster, undo)  # the pods gone is not their files gone
            seen = Observation(f"fio files {files.root} on pvc/{undo['claim']}", files.value(), files.source,
                               not files.present)
            return [pods, seen], tuple(left) + ((files.root,) if files.present else ())

        return read(KIND, f"{ns}/{name}", job_reader)
    files_dir = undo.get("files_dir") or (record or {}).get("files_dir")
    saturation = SaturationRecord.from_dict(record) if record else files_dir

    def local_reader():
        pids = leftover_fio(saturation)
        there = Path(files_dir).exists()
        seen = [Observation(f"fio of {files_dir}", f"{len(pids)} process(es) alive" +
                            (f": pid {', '.join(map(str, pids))}" if pids else ""), "/proc (pid + start time, argv)",
                            not pids),
                Observation(f"fio files {files_dir}", "present" if there else "absent", "the store's directory listing",
                            not there)]
        left = [f"pid {p}" for p in pids] + ([files_dir] if there else [])
        if undo.get("mode") == "clients":  # the controlling fio gone is not the servers' jobs gone
            from drills.faults.storage.clients import servers_ended

            ended, value, source = servers_ended(record, int(undo.get("clients") or 1))
            seen.append(Observation("fio servers' jobs", value, source, ended))
            left += [] if ended else ["fio servers' jobs"]
        return seen, tuple(left)

    return read(KIND, str(files_dir), local_reader)
