"""A twin killed with SIGKILL cannot unmount its FUSE store: the mount point is left answering ENOTCONN
(rm fails on it, `ls` fails on it). The next twin detaches such dead `twin-store` mounts before mounting
its own — and never touches a live store, its own or another twin's."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from drills.twin.workloads.storefs import StoreModel, StoreMount, fuse_available, sweep_dead_mounts

pytestmark = pytest.mark.skipif(fuse_available() is not None, reason=f"needs FUSE: {fuse_available()}")

SERVE = """
import sys, threading
from drills.twin.workloads.storefs import StoreModel, StoreMount
StoreMount(sys.argv[1], sys.argv[2], StoreModel(bandwidth_mb_s=100, client_bandwidth_mb_s=50)).start()
print("mounted", flush=True)
threading.Event().wait()
"""


def _enotconn(path) -> bool:
    try:
        os.stat(path)
    except OSError as err:
        return err.errno == errno.ENOTCONN
    return False


def test_a_killed_twins_store_is_detached_and_a_live_one_is_left(tmp_path):
    dead_point, live = tmp_path / "dead" / "checkpoint-store", None
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(dead_point), str(tmp_path / "dead" / "backing")],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "mounted"
        live = StoreMount(tmp_path / "live" / "checkpoint-store", tmp_path / "live" / "backing",
                          StoreModel(bandwidth_mb_s=100, client_bandwidth_mb_s=50))
        live.start()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not _enotconn(dead_point):  # the kernel notices the closed /dev/fuse at once; allow a moment
            assert time.monotonic() < deadline, "the killed store never answered ENOTCONN"
            time.sleep(0.02)
        sweep_dead_mounts()  # (another worker's twin starting now may have detached it first: the same end)
        assert not os.path.ismount(dead_point) and not _enotconn(dead_point)
        assert os.path.ismount(live.mountpoint)
        (live.mountpoint / "still-served").write_text("yes")
        assert (live.mountpoint / "still-served").read_text() == "yes"
    finally:
        proc.kill()
        if live is not None:
            live.stop()
