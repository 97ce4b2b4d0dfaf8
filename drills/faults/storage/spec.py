"""What a storage saturation is: the `SaturationSpec` the profile asks for, and the fio job it runs.

One spec serves every mode (drills/faults/storage/saturation.py is the fault; `local.py` runs fio here,
`job.py` runs it in a Kubernetes Job, `clients.py` drives fio servers): how hard (rw, bs, numjobs,
iodepth, direct), how long at most (`max_seconds`: fio's own limit, so a crashed drill cannot saturate
for ever) and where (a directory, a claim, storage clients).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from drills.core.errors import InvalidProfile
from drills.faults.storage.fio import FioJob
from drills.profile.images import FIO_IMAGE
from drills.profile.storage import RUN_AS

__all__ = ["MODES", "DEFAULT_IMAGE", "JOB_NAME", "FILES_PREFIX", "LABELS", "SaturationSpec", "saturation_spec",
           "fio_jobs", "remote_job"]

log = logging.getLogger(__name__)

MODES = ("local", "job", "clients")
DEFAULT_IMAGE = FIO_IMAGE  # by digest; a profile pins its own mirror's
JOB_NAME = "drills-saturate"
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
    per_node: bool = False  # one pod per selected node, required anti-affinity (parallelism: the node count)
    image: str = DEFAULT_IMAGE
    job_name: str = "drills-fio-saturation"
    mount_path: str = "/store"
    run_as_user: int = RUN_AS  # fio's uid and gid in the pods (never 0), and the volume's fsGroup (None: not set)
    run_as_group: int = RUN_AS
    fs_group: int | None = RUN_AS
    tolerations: tuple[dict, ...] = ()  # e.g. the GPU nodes' taint: the storage clients are those nodes
    node_selector: tuple[tuple[str, str], ...] = ()
    priority_class_name: str | None = None
    resources: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # requests/limits, as PodResources renders
    # clients mode
    clients: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", str(self.directory))
        object.__setattr__(self, "clients", tuple(self.clients))
        object.__setattr__(self, "extra", tuple((str(k), str(v)) for k, v in dict(self.extra).items()))
        object.__setattr__(self, "tolerations", tuple(dict(t) for t in self.tolerations))
        object.__setattr__(self, "node_selector", tuple(dict(self.node_selector).items()))
        object.__setattr__(self, "resources", tuple((k, tuple(dict(v).items())) for k, v in dict(self.resources).items()))
        if self.mode not in MODES:
            raise InvalidProfile(f"storage saturation mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.max_seconds <= 0:
            raise InvalidProfile(f"storage saturation max_seconds {self.max_seconds} must be > 0")
        if self.run_as_user < 1 or self.run_as_group < 1:
            raise InvalidProfile(f"fio must not run as root (run_as_user {self.run_as_user}, run_as_group "
                                 f"{self.run_as_group}): set a uid and gid ≥ 1 that may write the store")
        if self.parallelism < 1:
            raise InvalidProfile(f"storage saturation parallelism {self.parallelism} must be ≥ 1")


def saturation_spec(profile, directory: str, output: str | None = None) -> SaturationSpec:
    """The saturation the profile's `storage` section asks for, against `directory`."""
    st, sat = profile.storage, profile.storage.saturation
    return SaturationSpec(
        directory=directory, mode=sat.mode, rw=sat.rw, bs=sat.block_size, size=sat.size, numjobs=sat.numjobs,
        iodepth=sat.iodepth, direct=sat.direct, max_seconds=sat.runtime_s, output=output,
        extra=tuple((k, str(int(v)) if isinstance(v, bool) else str(v)) for k, v in st.fio_options.items()),
        namespace=sat.namespace, claim=sat.claim, parallelism=sat.parallelism, per_node=sat.per_node, image=sat.image,
        mount_path=sat.mount_path, run_as_user=sat.run_as_user, run_as_group=sat.run_as_group,
        fs_group=sat.fs_group, tolerations=tuple(sat.tolerations), node_selector=tuple(sat.node_selector.items()),
        priority_class_name=sat.priority_class_name, resources=sat.resources.to_k8s(), clients=tuple(sat.clients))


def fio_jobs(spec: SaturationSpec, directory: str | Path) -> list[FioJob]:
    """The saturating fio job for `directory`: time-based, bounded by `spec.max_seconds`."""
    return [FioJob(name=JOB_NAME, directory=str(directory), rw=spec.rw, rwmixread=spec.rwmixread, bs=spec.bs,
                   size=spec.size, numjobs=spec.numjobs, iodepth=spec.iodepth, ioengine=spec.ioengine,
                   direct=spec.direct, runtime=spec.max_seconds, time_based=True, extra=spec.extra)]


def remote_job(job: FioJob, spec: SaturationSpec, unlink: bool = False) -> FioJob:
    """The job for another machine's fio: the engine is named (not probed here)."""
    return replace(job, ioengine="libaio" if spec.ioengine == "auto" else spec.ioengine, unlink=unlink)
