"""The profile's `storage` section: the checkpoint store, its probe, and how fio saturates it
(drills/faults/storage/: local, job, per-node job, clients)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from drills.core.grammar import DnsLabel, DnsSubdomain, LabelKey, LabelValue, RemotePath, check
from drills.profile.base import Seconds, Strict
from drills.profile.images import FIO_IMAGE, check_image
from drills.profile.load import PodResources

__all__ = ["Saturation", "StorageConfig"]

_FIO_HOST = re.compile(r"^(?:(?:ip|ip6|sock):)?[A-Za-z0-9][A-Za-z0-9._:-]{0,252}(?:,\d{1,5})?$")
RUN_AS = 10001  # fio's default uid and gid: not root, not a system account
_SIZE = re.compile(r"^\d+(?:\.\d+)?[kKmMgGtT]?(?:i?[bB])?$")


class Saturation(Strict):
    mode: Literal["local", "job", "clients"] = "local"  # see drills/injectors/storage.py
    rw: Literal["write", "read", "randwrite", "randread", "rw", "randrw"] = "write"
    block_size: str = "1M"
    size: str = "1G"
    numjobs: int = Field(4, gt=0, le=256)
    iodepth: int = Field(16, gt=0, le=4096)
    runtime_s: Seconds = 120.0  # fio's own time limit: a crashed drill cannot saturate for longer
    # when the drill ends the saturation: `runtime` (fio runs its runtime_s, or until the drill is done) or
    # `probe` (once the checkpoint probe under it is measured: a short flood of a store shared with
    # production; the training saves are then judged only if one started and ended inside that window)
    until: Literal["runtime", "probe"] = "runtime"
    direct: bool = True
    # job mode: N pods of a batch/v1 Job run fio against the store's PVC
    namespace: DnsLabel = "default"
    claim: DnsSubdomain | None = None
    mount_path: RemotePath = "/store"
    parallelism: int = Field(2, gt=0, le=1024)
    # job mode, one fio pod on EACH node matching node_selector (not cordoned), kept apart by a required pod
    # anti-affinity: every storage client loads the store at once (parallelism is then the node count)
    per_node: bool = False
    image: str = FIO_IMAGE  # by digest (drills/profile/images.py); a site pins its mirror's digest
    # who fio runs as (never root, Pod Security "restricted"): a uid/gid that may create directories in the store
    # under mount_path. fs_group makes the volume group-writable where the volume type supports it (the kubelet
    # changes ownership only when the root does not match: OnRootMismatch); many parallel file systems and NFS
    # ignore it: set run_as_user/run_as_group to an owner of the store's directory there, fs_group: null.
    run_as_user: int = Field(RUN_AS, ge=1, le=2**31 - 1)
    run_as_group: int = Field(RUN_AS, ge=1, le=2**31 - 1)
    fs_group: int | None = Field(RUN_AS, ge=1, le=2**31 - 1)
    priority_class_name: DnsSubdomain | None = None  # placement: the fio pods' PriorityClass (None: the namespace default)
    resources: PodResources = PodResources(cpu="1", memory="256Mi", memory_limit="1Gi")
    start_timeout_s: Seconds = 300.0  # cluster seconds for the Job's pods to be Running
    tolerations: list[dict[str, Any]] = []  # e.g. [{key: nvidia.com/gpu, operator: Exists}]: run on GPU nodes
    node_selector: dict[LabelKey, LabelValue] = {}
    # clients mode: hosts running `fio --server`, each "host", "host,port" or "ip:host,port" (fio's syntax)
    clients: list[str] = []

    @field_validator("clients")
    @classmethod
    def _client_hosts(cls, hosts: list[str]) -> list[str]:
        """Hosts reach fio's command line: each must be in fio's grammar, nothing else (DESIGN §6)."""
        for host in hosts:
            if not isinstance(host, str) or not _FIO_HOST.fullmatch(host):
                raise ValueError(f'must be fio server addresses like "10.0.0.5", "node-3,8765" or '
                                 f'"ip:10.0.0.5,8766" (got {host!r})')
        return hosts

    @field_validator("run_as_user", "run_as_group", "fs_group", mode="before")
    @classmethod
    def _not_root(cls, value: int | None) -> int | None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 1:
            raise ValueError(f"must be a uid/gid of 1 or more: fio never runs as root (got {value}); use one that "
                             "may write the store's directory")
        return value

    @field_validator("image")
    @classmethod
    def _by_digest(cls, value: str) -> str:
        return check_image(value, digest=True)

    @field_validator("block_size", "size")
    @classmethod
    def _size(cls, value: str) -> str:
        if not _SIZE.fullmatch(str(value)):
            raise ValueError(f'must be a size like "4k", "1M" or "10G" (got {value!r})')
        return str(value)


class StorageConfig(Strict):
    checkpoint_store: str = "/ckpt"  # a directory, or "from-twin": the twin's checkpoint store
    probe_size_mb: int = Field(256, gt=0, le=1_048_576)  # at most 1 TiB
    probe_shards: int = Field(4, gt=0, le=1024)
    probe_save_limit_s: Seconds | None = None  # absolute limit on the probe's save under saturation
    saturation: Saturation = Saturation()
    # Extra fio job options, name → value, from an allowlist (drills/profile/fio_options.py): rate,
    # rate_min, rate_iops, rate_iops_min, rate_process, ioengine (sync, psync, libaio, io_uring, …), bs,
    # bssplit, blockalign, size, io_size, nrfiles, loops, numjobs, iodepth (+ batch options), rw,
    # rwmixread, rwmixwrite, direct, buffered, invalidate, thread, refill_buffers, runtime, time_based,
    # ramp_time, startdelay, group_reporting, norandommap, randrepeat, randseed, random_distribution,
    # fsync, fdatasync, end_fsync, fsync_on_close, buffer_compress_percentage, dedupe_percentage,
    # file_service_type. Options that run commands or write elsewhere (exec_prerun, exec_postrun,
    # filename, directory, opendir, write_*_log, write_iolog, ioscheduler, cgroup, …) are refused.
    fio_options: dict[str, str | int | float | bool] = {}
    bandwidth_target_mb_s: float | None = Field(None, gt=0, le=10_000_000)

    @field_validator("checkpoint_store")
    @classmethod
    def _store_path(cls, value: str) -> str:
        """The store's directory reaches fio's job file and command lines (clients, job mode): its grammar only."""
        return value if value == "from-twin" else check("remote_path", value)

    @field_validator("fio_options", mode="before")
    @classmethod
    def _fio_allowlist(cls, options):
        """Names and values as written (before any coercion: `.inf` is refused as a value, not as a type)."""
        from drills.profile.fio_options import check_fio_options

        return check_fio_options(options) if isinstance(options, dict) else options
