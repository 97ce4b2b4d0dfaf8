# WARNING: saturates the checkpoint store: background fio jobs take its bandwidth and IOPS until reverted
# (or until `max_seconds`, fio's own limit), so every training job's checkpoint saves and reads slow down.
"""Storage saturation: fio floods the store so the drill can see whether checkpoint I/O still holds.

Three modes, all from one `SaturationSpec`:

- `local`: fio runs here, in the background, against a directory (the twin's store is a directory
  under the run). `inject(spec)` starts it and returns a `SaturationRecord`; `revert(record)` stops
  it (also from another process, from the record's `to_dict()`) and removes its files.
- `job`: on a real cluster, N pods of a Kubernetes Job run fio against the store's PVC, so the load
  comes from several nodes. `render_fio_job(spec)` renders the batch/v1 Job; each pod writes under
  its own subdirectory and removes it when fio ends or the pod is deleted. Applying it through the
  API (and deleting it on revert) belongs to the cluster-side injector.
- `clients`: fio's own client/server mode, for a store that one client cannot saturate. Each storage
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
import os
import shlex
import shutil
import signal
import time
import uuid
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from drills.core.errors import DrillError, InjectionFailed, InvalidProfile, RevertFailed
from drills.faults import Plan, Reach
from drills.faults.storage.fio import FioJob, start_fio

__all__ = [
    "MODES",
    "DEFAULT_IMAGE",
    "SaturationSpec",
    "SaturationRecord",
    "KIND",
    "inject",
    "revert",
    "revert_spec",
    "plan",
    "saturation_spec",
    "start_local",
    "stop_local",
    "new_files_dir",
    "fio_jobs",
    "render_fio_job",
    "render_jobfile",
    "clients_argv",
    "leftover_fio",
]

log = logging.getLogger(__name__)

MODES = ("local", "job", "clients")
# Alpine with fio (kubestone's image); a profile should pin its own mirror and tag.
DEFAULT_IMAGE = "docker.io/xridge/fio:latest"
JOB_NAME = "drills-saturate"
KIND = "storage"
FILES_PREFIX = ".drills-fio-"
LABELS = {"app.kubernetes.io/name": "fio", "app.kubernetes.io/managed-by": "gpu-drills",
          "drills/fault": "storage-saturation"}


@dataclass(frozen=True)
class SaturationSpec:
    """How hard and where to saturate. Defaults aim at bandwidth: large random mixed I/O, deep queues,
    direct I/O (so the page cache does not absorb it), several jobs."""

    directory: str
    mode: str = "local"
    rw: str = "randrw"
    rwmixread: int = 50
    bs: str = "1m"
    size: str = "256m"
    numjobs: int = 4
    iodepth: int = 16
    direct: bool = True
    ioengine: str = "auto"
    max_seconds: float = 900.0
    output: str | None = None
    extra: tuple[tuple[str, str], ...] = ()  # more fio options (profile `storage.fio_options`), e.g. rate
    # job mode
    namespace: str = "default"
    claim: str | None = None
    parallelism: int = 2
    image: str = DEFAULT_IMAGE
    job_name: str = "drills-fio-saturation"
    mount_path: str = "/store"
    tolerations: tuple[dict, ...] = ()  # e.g. the GPU nodes' taint: the storage clients are those nodes
    node_selector: tuple[tuple[str, str], ...] = ()
    # clients mode
    clients: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", str(self.directory))
        object.__setattr__(self, "clients", tuple(self.clients))
        object.__setattr__(self, "extra", tuple((str(k), str(v)) for k, v in dict(self.extra).items()))
        object.__setattr__(self, "tolerations", tuple(dict(t) for t in self.tolerations))
        object.__setattr__(self, "node_selector", tuple(dict(self.node_selector).items()))
        if self.mode not in MODES:
            raise InvalidProfile(f"storage saturation mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.max_seconds <= 0:
            raise InvalidProfile(f"storage saturation max_seconds {self.max_seconds} must be > 0")
        if self.parallelism < 1:
            raise InvalidProfile(f"storage saturation parallelism {self.parallelism} must be ≥ 1")


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


def revert_spec(spec: SaturationSpec, files_dir: str | None = None) -> dict[str, Any]:
    """What the journal keeps so `revert_entry` can undo the saturation alone, even after a crash mid-inject."""
    if spec.mode == "job":
        return {"mode": "job", "namespace": spec.namespace, "job_name": spec.job_name}
    return {"mode": spec.mode, "directory": spec.directory, "files_dir": files_dir}


def plan(target, profile, *, directory: str, output: str | None = None) -> Plan:
    """Read-only: the profile's saturation (local fio, or a fio Job in an allowed namespace) of `directory`."""
    spec = saturation_spec(profile, directory, output)
    if spec.mode == "job":
        if not spec.claim:
            raise InvalidProfile("storage.saturation.claim: job mode needs the store's PersistentVolumeClaim")
        cluster = target.cluster
        return Plan(KIND, f"{spec.namespace}/{spec.job_name}",
                    f"saturate the store with fio Job {spec.namespace}/{spec.job_name} ({spec.parallelism} pods × "
                    f"{spec.numjobs} jobs, bs {spec.bs}, iodepth {spec.iodepth}) on {cluster.name}",
                    revert_spec(spec), Reach(namespaces=(spec.namespace,)),
                    spec=(spec, profile.storage.saturation.start_timeout_s))
    if spec.mode == "clients":
        raise InvalidProfile("storage.saturation.mode: clients mode is driven by `fio --client` from an operator host "
                             "(see clients_argv); use local or job mode in a drill")
    files_dir = new_files_dir(spec)
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
    record = start_local(spec, start_timeout_s, files_dir=plan.undo["files_dir"]).to_dict()
    record["injected_at"] = target.clock.iso(target.clock.now())
    return record


def saturation_spec(profile, directory: str, output: str | None = None) -> SaturationSpec:
    """The saturation the profile's `storage` section asks for, against `directory`."""
    st, sat = profile.storage, profile.storage.saturation
    return SaturationSpec(
        directory=directory, mode=sat.mode, rw=sat.rw, bs=sat.block_size, size=sat.size, numjobs=sat.numjobs,
        iodepth=sat.iodepth, direct=sat.direct, max_seconds=sat.runtime_s, output=output,
        extra=tuple((k, str(int(v)) if isinstance(v, bool) else str(v)) for k, v in st.fio_options.items()),
        namespace=sat.namespace, claim=sat.claim, parallelism=sat.parallelism, image=sat.image,
        mount_path=sat.mount_path, tolerations=tuple(sat.tolerations), node_selector=tuple(sat.node_selector.items()),
        clients=tuple(sat.clients))


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Stop fio and remove its files (or delete the Job and wait for its pods); idempotent, any process."""
    if undo.get("mode") == "job":
        from drills.faults.storage.job import revert_job

        revert_job(target.cluster, undo["namespace"], undo["job_name"])
        return "reverted"
    # Without a record (a crash before it was journaled) fio is found by its files directory.
    stop_local(SaturationRecord.from_dict(record) if record else undo["files_dir"])
    return "reverted"


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


def fio_jobs(spec: SaturationSpec, directory: str | Path) -> list[FioJob]:
    """The saturating fio job for `directory`: time-based, bounded by `spec.max_seconds`."""
    return [FioJob(name=JOB_NAME, directory=str(directory), rw=spec.rw, rwmixread=spec.rwmixread, bs=spec.bs,
                   size=spec.size, numjobs=spec.numjobs, iodepth=spec.iodepth, ioengine=spec.ioengine,
                   direct=spec.direct, runtime=spec.max_seconds, time_based=True, extra=spec.extra)]


def render_fio_job(spec: SaturationSpec) -> dict[str, Any]:
    """The batch/v1 Job for `job` mode: `parallelism` pods, each running fio in its own directory of the PVC."""
    if not spec.claim:
        raise InvalidProfile("storage saturation job mode needs the store's PersistentVolumeClaim (claim)")
    workdir = f"{spec.mount_path.rstrip('/')}/{FILES_PREFIX}{spec.job_name}/$(POD_NAME)"  # kubelet expands
    job = _remote(fio_jobs(spec, "$D")[0], spec)
    argv = ["fio", "--output-format=json", *job.to_argv()]
    fio_cmd = " ".join(shlex.quote(a) if a != "--directory=$D" else '--directory="$D"' for a in argv)
    script = "\n".join([
        f"D={shlex.quote(workdir)}",
        'mkdir -p "$D"',
        # pod deletion: stop fio, remove its files; sh is PID 1 and only gets SIGTERM with a trap
        """trap 'kill -TERM $FIO 2>/dev/null; wait $FIO; rm -rf "$D"; exit 143' TERM INT""",
        f"{fio_cmd} &",
        "FIO=$!",
        "wait $FIO; rc=$?",
        'rm -rf "$D"',
        "exit $rc",
    ])
    labels = {**LABELS, "job-name": spec.job_name}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": spec.job_name, "namespace": spec.namespace, "labels": dict(LABELS)},
        "spec": {
            "parallelism": spec.parallelism,
            "completions": spec.parallelism,
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(spec.max_seconds) + 120,  # the cluster's own safety net
            "ttlSecondsAfterFinished": 600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 30,
                    # spread over nodes: the point is load from several storage clients
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                            "labelSelector": {"matchLabels": {"job-name": spec.job_name}}},
                    }]}},
                    "containers": [{
                        "name": "fio",
                        "image": spec.image,
                        "command": ["/bin/sh", "-c", script],
                        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "volumeMounts": [{"name": "store", "mountPath": spec.mount_path}],
                    }],
                    "volumes": [{"name": "store", "persistentVolumeClaim": {"claimName": spec.claim}}],
                    **({"tolerations": [dict(t) for t in spec.tolerations]} if spec.tolerations else {}),
                    **({"nodeSelector": dict(spec.node_selector)} if spec.node_selector else {}),
                },
            },
        },
    }


def render_jobfile(spec: SaturationSpec) -> str:
    """The job file `clients` mode sends to every fio server (paths are the servers' own)."""
    return "".join(_remote(job, spec, unlink=True).to_jobfile() for job in fio_jobs(spec, spec.directory))


def clients_argv(spec: SaturationSpec, jobfile: str | Path, output: str | Path | None = None,
                 binary: str = "fio") -> list[str]:
    """The controlling command for `clients` mode: one `--client=<host> <jobfile>` pair per storage client."""
    if not spec.clients:
        raise InvalidProfile("storage saturation clients mode needs at least one client host (clients)")
    argv = [binary, "--output-format=json"] + ([f"--output={output}"] if output else [])
    for host in spec.clients:
        argv += [f"--client={host}", str(jobfile)]
    return argv


def leftover_fio(record: SaturationRecord | str) -> list[int]:
    """Live fio processes of this record: its own pid (if its start time matches) and any fio whose
    command line names the record's files directory (or the files directory given alone)."""
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
        if argv and os.path.basename(argv[0]) == "fio" and marker in argv and _alive(int(entry.name)):
            found.add(int(entry.name))
    return sorted(found)


# helpers

def _remote(job: FioJob, spec: SaturationSpec, unlink: bool = False) -> FioJob:
    """The job for another machine's fio: the engine is named (not probed here)."""
    return replace(job, ioengine="libaio" if spec.ioengine == "auto" else spec.ioengine, unlink=unlink)


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (field 3, the state, first)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


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
