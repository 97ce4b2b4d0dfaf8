"""Storage saturation in `clients` mode (fio's client/server mode) with two real `fio --server`s on 127.0.0.1,
distinct ports: the storage drill saturates the twin's store from both and passes, fio's report is the "All
clients" total of the two, each client wrote in its own directory, and nothing is left once it reverted —
also when only the journal's files directory is known (`drills revert` after a crash)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from drills.faults.storage.clients import start_clients
from drills.faults.storage.local import leftover_fio, stop_local
from drills.faults.storage.spec import SaturationSpec
from tests.e2e.drill_helpers import drills, records, write_profile

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def fio_servers(tmp_path):
    """Two fio servers on loopback, each on its own port; stopped (by pid) afterwards."""
    procs, hosts = [], []
    try:
        for n in range(2):
            port = _free_port()
            log = open(tmp_path / f"server-{n}.log", "wb")
            procs.append(subprocess.Popen(["fio", f"--server=ip:127.0.0.1,{port}"], stdout=log, stderr=log,
                                          stdin=subprocess.DEVNULL))
            hosts.append(f"ip:127.0.0.1,{port}")
            deadline = time.monotonic() + 30
            while not _listening(port):  # the server's socket is the event waited for
                assert procs[-1].poll() is None and time.monotonic() < deadline, (tmp_path / f"server-{n}.log").read_text()
                time.sleep(0.02)
        yield hosts
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def test_the_storage_drill_saturates_the_store_from_two_fio_servers(fio_servers, tmp_path):
    profile = write_profile(tmp_path / "clients.yaml", f"""\
storage:
  checkpoint_store: from-twin
  probe_size_mb: 4
  probe_shards: 4
  probe_save_limit_s: 5s
  bandwidth_target_mb_s: 40
  saturation: {{mode: clients, clients: {json.dumps(fio_servers)}, rw: write, block_size: 1M, size: 16M,
                numjobs: 1, iodepth: 4, runtime_s: 5m}}
safety:
  allow: {{nodes: ["*"], namespaces: [ai-platform]}}
""")
    proc = drills("run", "-m", "storage", "--profile", profile, "--no-html", "--reports", str(tmp_path / "r"),
                  "--run-id", "clients", timeout=600)
    (rec,) = records(tmp_path / "r" / "clients")
    assert proc.returncode == 0 and rec["verdict"] == "pass", (proc.stdout[-2000:], rec["reason"])
    fio = rec["details"]["fio"]
    assert fio["jobs"] == ["All clients"] and fio["write"]["io_bytes"] > 0
    (fault,) = rec["details"]["faults"]
    assert fault["mode"] == "clients" and not Path(fault["files_dir"]).exists(), fault
    journal = (tmp_path / "r" / "clients" / "journal.jsonl").read_text()
    assert '"mode":"clients"' in journal and '"op":"close"' in journal


def test_each_client_writes_its_own_directory_and_a_crash_revert_finds_the_controlling_fio(fio_servers, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    spec = SaturationSpec(directory=str(store), mode="clients", clients=tuple(fio_servers), rw="write", bs="1m",
                          size="8m", numjobs=1, iodepth=2, max_seconds=600, ioengine="psync", direct=False)
    record = start_clients(spec, start_timeout=60)
    try:
        files = Path(record.files_dir)
        assert sorted(p.name for p in files.iterdir() if p.is_dir()) == ["client-0", "client-1"]
        assert all(any(files.joinpath(d).iterdir()) for d in ("client-0", "client-1"))
        assert leftover_fio(record.files_dir) == [record.pid]  # found by its job files, as after a crash
    finally:
        stop_local(record.files_dir)  # what `drills revert` does with the journal's files directory alone
    assert leftover_fio(record.files_dir) == [] and not Path(record.files_dir).exists()


def _server_jobs(servers: list) -> list[int]:
    """The twin's truth here: fio job processes of our servers (by port) other than the servers themselves — a job
    orphaned by its killed client is reparented away from its server, so it is found by its command line."""
    ports = {h.rsplit(",", 1)[1] for h in servers}
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and argv[:1] == [b"fio"] and any(a.decode(errors="replace").endswith(f",{p}")
                                                                  for a in argv[1:2] for p in ports):
            found.append(int(proc.name))
    return found


def test_a_killed_controlling_fio_leaves_the_servers_jobs_unconfirmed_until_their_time_limit(fio_servers, tmp_path):
    """Issue 30, class 2, clients mode: the controlling fio killed (SIGKILL after its grace, the OOM killer) tells no
    server to quit — their jobs run on (the truth, read from /proc here: the servers are local) — and the revert
    removes the files directory and finds no fio of ours here, all the read-back used to read (undone, before).
    Now it also reads the controlling fio's report: no server's results in it, so their end is not confirmed (not
    undone, naming why and until when); once fio's own time limit has passed, it is."""
    import os
    import signal

    from drills.faults import Target
    from drills.faults.storage import saturation as storage

    store = tmp_path / "store"
    store.mkdir()
    spec = SaturationSpec(directory=str(store), mode="clients", clients=tuple(fio_servers), rw="write", bs="64k",
                          size="4m", numjobs=1, iodepth=1, max_seconds=4, ioengine="psync", direct=False,
                          output=str(tmp_path / "fio.json"))
    servers = set(_server_jobs(fio_servers))
    record = start_clients(spec, start_timeout=60).to_dict()
    undo = storage.revert_spec(spec, record["files_dir"])
    os.kill(record["pid"], signal.SIGKILL)  # the controlling fio, killed
    assert set(_server_jobs(fio_servers)) - servers, "the servers' jobs run on after their client's SIGKILL"
    assert storage.revert(Target(), undo, record) == "reverted"
    reading = storage.verify(Target(), undo, record)
    local, files, jobs = reading.observations
    assert local.ok and files.ok and files.value == "absent"  # all the read-back read before: undone
    assert reading.undone is False and not jobs.ok and jobs.value.startswith(
        "not confirmed: the controlling fio left no readable report (killed?)"), jobs
    assert jobs.source == f"fio report {tmp_path / 'fio.json'}" and reading.left == ("fio servers' jobs",)
    until = datetime.fromisoformat(record["started"]) + timedelta(seconds=4)
    while datetime.now(timezone.utc) < until:  # fio's own time limit, on the wall clock the servers run on
        time.sleep(0.1)
    later = storage.verify(Target(), undo, record)
    assert later.undone is True and later.observations[2].value.startswith("ended by fio's own time limit"), later
