"""The twin's store is served by its own process. A twin killed with SIGKILL leaves no mount behind: its store
server reads the end of its pipe, unmounts and exits. A store server killed with SIGKILL cannot unmount: the mount
point is left answering ENOTCONN (rm fails on it, `ls` fails on it) — the next twin detaches such dead `twin-store`
mounts before mounting its own, and never touches a live store, its own or another twin's."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from drills.twin.workloads.store_mount import StoreMount, fuse_available, sweep_dead_mounts
from drills.twin.workloads.storefs import StoreModel

pytestmark = pytest.mark.skipif(fuse_available() is not None, reason=f"needs FUSE: {fuse_available()}")

SERVE = """
import sys, threading
from drills.twin.workloads.store_mount import StoreMount
from drills.twin.workloads.storefs import StoreModel
mount = StoreMount(sys.argv[1], sys.argv[2], StoreModel(bandwidth_mb_s=100, client_bandwidth_mb_s=50))
mount.start()
print("mounted", mount.server_pid, flush=True)
threading.Event().wait()
"""


def _enotconn(path) -> bool:
    try:
        os.stat(path)
    except OSError as err:
        return err.errno == errno.ENOTCONN
    return False


def _twin(tmp_path, name):
    point = tmp_path / name / "checkpoint-store"
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(point), str(tmp_path / name / "backing")],
                            stdout=subprocess.PIPE, text=True)
    said, pid = proc.stdout.readline().split()
    assert said == "mounted"
    return proc, point, int(pid)


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_killed_twin_leaves_no_mount(tmp_path):
    proc, point, server = _twin(tmp_path, "twin")
    try:
        assert os.path.ismount(point)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        _until(lambda: not os.path.ismount(point), "the killed twin's store is still mounted")
        _until(lambda: not os.path.exists(f"/proc/{server}") or _zombie(server), "the store server outlived its twin")
    finally:
        proc.kill()


def _mounted(path) -> bool:
    """`path` is a mount point in this process's mount table (os.path.ismount says False for an ENOTCONN one)."""
    with open("/proc/self/mounts") as fh:
        return any(line.split()[1] == str(path) for line in fh)


def _zombie(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def test_a_killed_store_server_is_detached_and_a_live_one_is_left(tmp_path):
    proc, dead_point, server = _twin(tmp_path, "dead")
    live = None
    try:
        live = StoreMount(tmp_path / "live" / "checkpoint-store", tmp_path / "live" / "backing",
                          StoreModel(bandwidth_mb_s=100, client_bandwidth_mb_s=50))
        live.start()
        os.kill(server, signal.SIGKILL)
        # the kernel notices the closed /dev/fuse at once; allow a moment. Another worker's twin starting now may
        # detach it first (its own sweep): the same end, so a plain folder again counts too (CI: waited for
        # ENOTCONN on a folder a neighbour had already swept)
        _until(lambda: _enotconn(dead_point) or not _mounted(dead_point), "the killed store never answered ENOTCONN")
        sweep_dead_mounts()
        assert not os.path.ismount(dead_point) and not _enotconn(dead_point)
        assert os.path.ismount(live.mountpoint)
        (live.mountpoint / "still-served").write_text("yes")
        assert (live.mountpoint / "still-served").read_text() == "yes"
        assert live.model.op_totals()["WRITE"].bytes == 3
    finally:
        proc.kill()
        if live is not None:
            live.stop()
