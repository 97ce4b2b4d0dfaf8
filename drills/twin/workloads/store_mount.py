"""The twin's side of its modelled checkpoint store: start the store server (drills/twin/workloads/storefs.py run as
its own process), ask its model over a pipe (`RemoteModel`: a training save's slowdown, the mount's operation totals
and age), stop it, and detach the mounts of servers that were killed (`sweep_dead_mounts`).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from drills.twin.workloads import storefs
from drills.twin.workloads.storefs import FSNAME, OpStats, StoreModel, unmount

__all__ = ["StoreMount", "RemoteModel", "fuse_available", "sweep_dead_mounts"]

log = logging.getLogger(__name__)


def fuse_available() -> str | None:
    """None when a store can be mounted here, else why not (one line)."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    try:
        import fuse  # noqa: F401  (fusepy, which loads libfuse)
    except (ImportError, OSError, EnvironmentError) as err:
        return f"fusepy/libfuse not usable: {err}"
    return None


def sweep_dead_mounts(mounts: str = "/proc/self/mounts") -> list[str]:
    """Detach the twin stores whose serving process is gone (a twin killed with SIGKILL): mounts named
    `twin-store` whose mount point answers ENOTCONN. A live store — this twin's or another's — answers
    and is left alone; nothing else is ever touched. Returns the mount points detached."""
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return []
    dead = []
    for line in lines:
        fields = line.split()
        if len(fields) < 3 or fields[0] != FSNAME or not fields[2].startswith("fuse"):
            continue
        point = fields[1].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
        try:
            os.stat(point)
        except OSError as err:
            if err.errno == errno.ENOTCONN:
                dead.append(point)
    for point in dead:
        subprocess.run(["umount", "-l", point], check=False, capture_output=True, timeout=10)
        log.info("detached a dead twin store left by a killed twin: %s", point)
    return dead


class StoreMount:
    """A mounted modelled store served by its own process: `start()` mounts `mountpoint` over `backing`,
    `stop()` unmounts. `model` is then the serving process's model, asked over a pipe (`RemoteModel`).

    Its own process, because a real store does not share an interpreter lock with the API server: served
    from a thread of the twin, every 64 KB the store moved waited for the twin's other threads (one busy
    thread made a 0.1 s probe take 0.87 s), so what the probe measured was the twin's API load, not the
    store's model. The server unmounts and exits when its twin closes the pipe — or dies, even by SIGKILL."""

    def __init__(self, mountpoint: str | os.PathLike, backing: str | os.PathLike, model: StoreModel,
                 corrupt_reads: int = 0):
        self.mountpoint, self.backing = Path(mountpoint), Path(backing)
        self.model: StoreModel | RemoteModel = model  # the configuration until start(), the server's after
        self.corrupt_reads = corrupt_reads
        self._proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> None:
        sweep_dead_mounts()
        argv = [sys.executable, "-I", os.path.abspath(storefs.__file__), str(self.mountpoint), str(self.backing),
                repr(float(self.model.bandwidth_mb_s)), repr(float(self.model.client_bandwidth_mb_s)),
                str(int(self.corrupt_reads))]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                start_new_session=True)  # a Ctrl-C to the twin's group is the twin's to handle
        ready = _readline(proc, timeout)
        if ready != "ready":
            proc.kill()
            proc.wait()
            raise OSError(f"twin store not mounted at {self.mountpoint}: {ready or 'timed out'}")
        self._proc = proc
        self.model = RemoteModel(proc, self.model.bandwidth_mb_s, self.model.client_bandwidth_mb_s)
        log.info("twin store mounted at %s by pid %d (%g MB/s total, %g MB/s per client)", self.mountpoint,
                 proc.pid, self.model.bandwidth_mb_s, self.model.client_bandwidth_mb_s)

    @property
    def server_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()  # the server unmounts and exits
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if os.path.ismount(self.mountpoint):  # a server that could not unmount (busy): detach it lazily
            unmount(self.mountpoint)


class RemoteModel:
    """The serving process's StoreModel, asked over its pipe: what the twin needs of it (a training save's
    slowdown, the mount's operation totals and age). One question at a time."""

    def __init__(self, proc: subprocess.Popen, bandwidth_mb_s: float, client_bandwidth_mb_s: float):
        self._proc, self._lock = proc, threading.Lock()
        self.bandwidth_mb_s, self.client_bandwidth_mb_s = bandwidth_mb_s, client_bandwidth_mb_s

    def _ask(self, question: str) -> Any:
        with self._lock:
            try:
                self._proc.stdin.write(question + "\n")
                self._proc.stdin.flush()
                answer = self._proc.stdout.readline()
            except (OSError, ValueError) as err:
                raise OSError(f"twin store server gone: {err}") from None
        if not answer:
            raise OSError("twin store server gone")
        return json.loads(answer)

    def slowdown(self) -> float:
        return float(self._ask("slowdown"))

    def age_s(self) -> float:
        return float(self._ask("age"))

    def op_totals(self, share: float = 1.0) -> dict[str, OpStats]:
        return {op: OpStats(**fields) for op, fields in self._ask(f"ops {float(share)!r}").items()}


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    """The server's first line (or '' when it said nothing in `timeout` seconds)."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return got[0].strip() if got else ""
