"""The twin's checkpoint store as a mounted file system with a modelled bandwidth (FUSE).

Real tools write to it — fio, the drills' checkpoint probe — and every byte read or written goes
through one model of a shared parallel file system: `bandwidth_mb_s` in total, at most
`client_bandwidth_mb_s` per client (a process), shared fairly among the clients active in the last
`ACTIVE_S` seconds. So fio really takes bandwidth from the probe, a healthy store (headroom: the
clients' caps add up to less than the total) barely slows a checkpoint, and a slow store
(`slow-store`) slows everyone — measured by the tools themselves, nothing throttles a tool.

Files live in a backing directory beside the mount point (the twin's own checkpoint markers are
written there directly: the training job's saves are modelled, `StoreModel.slowdown()` says by how
much the clients slow them). Durability is the model's: `fsync` returns once the data has passed
the bandwidth model. `corrupt_reads` (defect `corrupt-store-reads`) flips one byte of the first
read of each of the first N files read back through the mount: a store that returns bad data.

Units are real (wall-clock) MB/s: the tools measure wall time; twin time dilation does not apply.

The store is served by its own process (this file run as a script: `serve()`; standard library and fusepy only,
so it starts without the twin's imports), as a real store is not the API server: a FUSE thread inside the twin
waited for the twin's interpreter lock after every quantum it slept, so the probe measured the twin's API load (one
busy thread: 0.1 s → 0.87 s). The twin's side — starting it, asking its model over a pipe, sweeping the mounts of
killed servers — is drills/twin/workloads/store_mount.py.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OpStats", "StoreModel", "serve", "unmount", "FSNAME", "ACTIVE_S", "MB"]

log = logging.getLogger(__name__)

MB = 1_000_000
ACTIVE_S = 0.5  # a client that moved bytes this recently shares the store's bandwidth
QUANTUM = 64 * 1024  # bytes granted at a time, so concurrent clients interleave
SLACK_S = 0.005  # how late a client may come back and still be on its previous schedule
# The store server's priority (as root): with four test workers on 2 cores, a healthy store's probe under fio measured
# 2.0x its baseline against the model's 1.2x — the Python server serving fio's requests queued the probe's behind
# them on a starved CPU, which a real store's own CPUs never do
STORE_NICE = -10


@dataclass
class _Client:
    next_free: float = 0.0  # monotonic time at which this client's previous bytes were delivered
    last_io: float = 0.0
    bytes: int = 0


@dataclass
class OpStats:
    """One operation's running totals on the store, as an NFS client counts them per mount (/proc/self/mountstats):
    requests, bytes, and wall seconds from the call to its completion (`request_s`), of which `response_s` the
    bytes needed at the client's own link rate — the rest waited for the store (`queue_s`)."""

    requests: float = 0
    bytes: float = 0
    request_s: float = 0.0
    response_s: float = 0.0

    @property
    def queue_s(self) -> float:
        return max(0.0, self.request_s - self.response_s)


@dataclass
class StoreModel:
    """Fair sharing of a store's bandwidth among its active clients, each also capped by its own link."""

    bandwidth_mb_s: float
    client_bandwidth_mb_s: float
    clients: dict[int, _Client] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    moved: int = 0
    busy_since: float | None = None
    ops: dict[str, OpStats] = field(default_factory=dict)  # "READ"/"WRITE" → totals (the twin's mountstats)
    started: float = field(default_factory=time.monotonic)

    def rate(self, now: float, extra: int = 0) -> float:
        """Bytes per second one client gets now (with `extra` more clients than are active)."""
        active = sum(1 for c in self.clients.values() if now - c.last_io <= ACTIVE_S) + extra
        share = self.bandwidth_mb_s / max(1, active)
        return min(share, self.client_bandwidth_mb_s) * MB

    def transfer(self, client: int, nbytes: int, op: str = "WRITE") -> None:
        """Block the caller for as long as the store takes to move `nbytes` for `client`; counted as one `op`."""
        called = time.monotonic()
        self._move(client, nbytes)
        own = nbytes / (self.client_bandwidth_mb_s * MB)
        with self.lock:
            stats = self.ops.setdefault(op, OpStats())
            stats.requests += 1
            stats.bytes += nbytes
            stats.request_s += time.monotonic() - called
            stats.response_s += own

    def age_s(self) -> float:
        """Wall seconds since the store was mounted (the mount's age)."""
        return time.monotonic() - self.started

    def op_totals(self, share: float = 1.0) -> dict[str, OpStats]:
        """A consistent copy of the per-operation totals (`share` of them: one of several clients' part)."""
        with self.lock:
            return {op: OpStats(s.requests * share, s.bytes * share, s.request_s * share,
                                s.response_s * share) for op, s in self.ops.items()}

    def _move(self, client: int, nbytes: int) -> None:
        left, first = nbytes, True
        while left > 0:
            chunk = min(QUANTUM, left)
            with self.lock:
                now = time.monotonic()
                c = self.clients.setdefault(client, _Client())
                # a streaming client keeps its schedule: oversleeping one quantum must not cost it bandwidth — within
                # one request never (the lateness is this store's own sleep, however busy the machine), between
                # requests by at most SLACK_S (longer, the client was idle: it banks no bandwidth)
                start = c.next_free if not first or now - c.next_free < SLACK_S else now
                first = False
                c.last_io = now
                c.next_free = start + chunk / self.rate(now)
                c.bytes += chunk
                self.moved += chunk
                wait = c.next_free - now
                self._forget(now)
            if wait > 0:
                time.sleep(wait)
            left -= chunk

    def slowdown(self, now: float | None = None) -> float:
        """How many times slower one more client (a training job's save) is now than on an idle store."""
        now = time.monotonic() if now is None else now
        with self.lock:
            alone = min(self.bandwidth_mb_s, self.client_bandwidth_mb_s) * MB
            return alone / self.rate(now, extra=1)

    def active_clients(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        with self.lock:
            return sum(1 for c in self.clients.values() if now - c.last_io <= ACTIVE_S)

    def _forget(self, now: float) -> None:
        if len(self.clients) > 256:
            for pid in [p for p, c in self.clients.items() if now - c.last_io > 10 * ACTIVE_S]:
                del self.clients[pid]


FSNAME = "twin-store"


def unmount(point: Path) -> None:
    binary = shutil.which("fusermount") or shutil.which("umount")
    argv = [binary, "-u", "-z", str(point)] if binary and "fusermount" in binary else ["umount", "-l", str(point)]
    subprocess.run(argv, check=False, capture_output=True, timeout=10)


def serve(mountpoint: Path, backing: Path, model: StoreModel, corrupt_reads: int, answers=None, questions=None) -> int:
    """The store server's main: mount, say `ready`, answer the twin's questions, unmount at end of input."""
    from fuse import FUSE

    answers = answers or sys.stdout
    questions = questions or sys.stdin
    try:  # the store is another machine: its server answers ahead of the host's load (it sleeps to its model, so it
        os.setpriority(os.PRIO_PROCESS, 0, STORE_NICE)  # cannot hog a core); unprivileged, it keeps the default
    except OSError:
        pass
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    ops = _Ops(backing, model, corrupt_reads)
    error: list[BaseException] = []

    def run() -> None:
        try:
            FUSE(ops, str(mountpoint), foreground=True, nothreads=False, allow_other=True, big_writes=True,
                 max_write=1 << 20, max_read=1 << 20, direct_io=True, fsname=FSNAME, default_permissions=True)
        except BaseException as err:  # noqa: BLE001 — reported as the first line
            error.append(err)

    thread = threading.Thread(target=run, name="twin-store-fuse", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not os.path.ismount(mountpoint):
        if error or not thread.is_alive() or time.monotonic() > deadline:
            print(f"error {error[0] if error else 'timed out'}".replace("\n", " "), file=answers, flush=True)
            return 1
        time.sleep(0.01)
    print("ready", file=answers, flush=True)
    for line in questions:
        what, _, arg = line.strip().partition(" ")
        if what == "slowdown":
            answer: Any = model.slowdown()
        elif what == "age":
            answer = model.age_s()
        elif what == "ops":
            answer = {op: asdict(s) for op, s in model.op_totals(float(arg or 1.0)).items()}
        else:
            answer = None
        print(json.dumps(answer), file=answers, flush=True)
    unmount(mountpoint)  # the twin closed the pipe, or died
    thread.join(timeout=5)
    return 0


def _pid() -> int:
    from fuse import fuse_get_context

    return fuse_get_context()[2]


class _Ops:
    """Passthrough to the backing directory, every read and write through the bandwidth model."""

    def __init__(self, backing: Path, model: StoreModel, corrupt_reads: int):
        self.root = str(backing)
        self.model = model
        self.corrupt_left = corrupt_reads
        self.corrupted: set[int] = set()
        self._guard = threading.Lock()

    def _p(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def __call__(self, op: str, *args: Any) -> Any:
        from fuse import FuseOSError

        method = getattr(self, op, None)
        if method is None:
            raise FuseOSError(errno.ENOSYS)
        try:
            return method(*args)
        except OSError as err:
            raise FuseOSError(err.errno or errno.EIO) from None

    def init(self, path):
        return None

    def destroy(self, path):
        return None

    # metadata
    def access(self, path, mode):
        if not os.access(self._p(path), mode):
            raise OSError(errno.EACCES, "access")

    def getattr(self, path, fh=None):
        st = os.lstat(self._p(path))
        return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink",
                                             "st_size", "st_uid", "st_blocks")}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._p(path))

    def statfs(self, path):
        sv = os.statvfs(self._p(path))
        return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                             "f_files", "f_flag", "f_frsize", "f_namemax")}

    def mkdir(self, path, mode):
        os.mkdir(self._p(path), mode)

    def rmdir(self, path):
        os.rmdir(self._p(path))

    def unlink(self, path):
        os.unlink(self._p(path))

    def rename(self, old, new):
        os.rename(self._p(old), self._p(new))

    def chmod(self, path, mode):
        os.chmod(self._p(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self._p(path), uid, gid)

    def utimens(self, path, times=None):
        os.utime(self._p(path), times)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._p(path), length)

    # data
    def open(self, path, flags):
        return os.open(self._p(path), flags & ~os.O_DIRECT & ~os.O_CREAT)

    def create(self, path, mode, fi=None):
        return os.open(self._p(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def read(self, path, size, offset, fh):
        data = os.pread(fh, size, offset)
        self.model.transfer(_pid(), len(data), "READ")
        if data and self.corrupt_left > 0:
            with self._guard:
                if self.corrupt_left > 0 and fh not in self.corrupted:
                    self.corrupt_left -= 1
                    self.corrupted.add(fh)
                    log.warning("twin store: corrupting a read of %s (defect)", path)
                    data = bytes([data[0] ^ 0xFF]) + data[1:]
        return data

    def write(self, path, data, offset, fh):
        self.model.transfer(_pid(), len(data), "WRITE")
        return os.pwrite(fh, data, offset)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return 0  # the model delivered the bytes: they are durable on the modelled store

    def fsyncdir(self, path, datasync, fh):
        return 0

    def release(self, path, fh):
        with self._guard:
            self.corrupted.discard(fh)
        os.close(fh)
        return 0


if __name__ == "__main__":  # the store server: python -I storefs.py MOUNTPOINT BACKING MB_S CLIENT_MB_S CORRUPT_READS
    logging.basicConfig(level=logging.INFO, format="twin-store %(levelname)s %(message)s")
    _point, _back, _bw, _cbw, _corrupt = sys.argv[1:6]
    sys.exit(serve(Path(_point), Path(_back), StoreModel(float(_bw), float(_cbw)), int(_corrupt)))
