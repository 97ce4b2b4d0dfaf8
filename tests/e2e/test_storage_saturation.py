"""Local storage saturation against real fio: no fio process or file survives revert, an fio that already
ended, a revert from another process, or SIGTERM of the process that injected."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from drills.core.errors import InjectionFailed
from drills.faults.storage.saturation import (
    SaturationRecord, SaturationSpec, clients_argv, leftover_fio, render_fio_job, render_jobfile, start_local, stop_local,
)
from drills.faults.storage.fio import fio_binary, parse_fio_output

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (make bootstraps it)")


def small_spec(directory: Path, **kw) -> SaturationSpec:
    return SaturationSpec(**{"directory": str(directory), "size": "8m", "numjobs": 2, "iodepth": 4,
                             "bs": "64k", "max_seconds": 120, **kw})


def wait_until(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def all_fio_under(directory: Path) -> list[int]:
    """Any live fio process whose command line mentions `directory` (not only the record's)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv and os.path.basename(argv[0]) == "fio" and str(directory) in " ".join(argv) and state != "Z":
            pids.append(int(entry.name))
    return pids


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    path.mkdir()
    yield path
    for pid in all_fio_under(tmp_path):  # a failing test must not leave fio behind either
        os.kill(pid, signal.SIGKILL)


def test_revert_after_inject_stops_fio_and_removes_its_files(store, tmp_path):
    spec = small_spec(store, output=str(tmp_path / "report" / "fio.json"))
    record = start_local(spec)
    assert leftover_fio(record) == [record.pid]
    assert sorted(p.name for p in Path(record.files_dir).glob("drills-saturate.*")) == \
        ["drills-saturate.0.0", "drills-saturate.1.0"]
    stop_local(record)
    assert all_fio_under(tmp_path) == []
    assert list(store.iterdir()) == []
    stop_local(record)  # idempotent
    # the report lives outside the files dir and survives: fio wrote it on SIGTERM
    assert parse_fio_output(Path(spec.output).read_text()).jobs == ("drills-saturate",)


def test_revert_when_fio_already_ended_by_its_time_limit(store, tmp_path):
    record = start_local(small_spec(store, max_seconds=1))
    assert wait_until(lambda: leftover_fio(record) == [])
    stop_local(record)
    assert list(store.iterdir()) == []


def test_a_record_survives_json_and_revert_from_another_process_kills_its_fio(store, tmp_path):
    script = textwrap.dedent(f"""
        import json, signal, sys
        from drills.faults.storage.saturation import SaturationSpec, start_local
        record = start_local(SaturationSpec(directory={str(store)!r}, size="8m", numjobs=2, bs="64k", max_seconds=120))
        print(json.dumps(record.to_dict()), flush=True)
        sys.stdin.read()  # hold on until the test closes stdin
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        record = SaturationRecord.from_dict(json.loads(holder.stdout.readline()))
        assert record.to_dict() == json.loads(json.dumps(record.to_dict()))
        assert all_fio_under(store) == [record.pid]
        stop_local(record)  # fio is not our child here
        assert all_fio_under(tmp_path) == []
        assert list(store.iterdir()) == []
    finally:
        holder.stdin.close()
        holder.wait(30)


def test_sigterm_of_the_injecting_process_reverts_through_its_handler(store, tmp_path):
    script = textwrap.dedent(f"""
        import json, signal, sys
        from drills.faults.storage.saturation import SaturationSpec, start_local, stop_local
        record = start_local(SaturationSpec(directory={str(store)!r}, size="8m", numjobs=2, bs="64k", max_seconds=120))
        def on_term(signum, frame):
            stop_local(record)
            sys.exit(143)
        signal.signal(signal.SIGTERM, on_term)
        print(json.dumps(record.to_dict()), flush=True)
        while True:
            signal.pause()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    record = SaturationRecord.from_dict(json.loads(proc.stdout.readline()))
    assert all_fio_under(store) == [record.pid]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 143
    assert all_fio_under(tmp_path) == []
    assert list(store.iterdir()) == []


def test_a_reused_pid_is_never_killed(store, tmp_path):
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        record = SaturationRecord(directory=str(store), files_dir=str(store / ".drills-fio-gone"),
                                  pid=bystander.pid, pgid=bystander.pid, proc_start=1,  # not its start time
                                  started="2026-01-01T00:00:00+00:00", output=str(tmp_path / "x.json"), max_seconds=1)
        assert leftover_fio(record) == []
        stop_local(record)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_an_unwritable_store_fails_injection_in_one_line(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(InjectionFailed, match=r"^cannot create fio files under .*a-file/store: Not a directory$"):
        start_local(small_spec(tmp_path / "a-file" / "store"))


def test_fio_refusing_the_job_leaves_nothing_behind(store):
    with pytest.raises(InjectionFailed, match="did not start: fio failed: .*not loadable"):
        start_local(small_spec(store, ioengine="no-such-engine"))
    assert list(store.iterdir()) == []


def test_job_and_clients_modes_do_not_run_locally(store):
    with pytest.raises(InjectionFailed, match="render_fio_job"):
        start_local(small_spec(store, mode="job", claim="ckpt"))
    with pytest.raises(InjectionFailed, match="clients_argv"):
        start_local(small_spec(store, mode="clients", clients=("a",)))


def test_clients_mode_drives_a_fio_server(store, tmp_path):
    sock = tmp_path / "fio.sock"
    server = subprocess.Popen([fio_binary(), f"--server=sock:{sock}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_until(sock.exists)
        spec = small_spec(store, mode="clients", clients=(f"sock:{sock}",), max_seconds=1, direct=False)
        jobfile = tmp_path / "saturate.fio"
        jobfile.write_text(render_jobfile(spec))
        output = tmp_path / "clients.json"
        subprocess.run(clients_argv(spec, jobfile, output=output, binary=fio_binary()), check=True, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        result = parse_fio_output(output.read_text())
        assert result.read.io_bytes > 0 and result.write.io_bytes > 0
        assert list(store.iterdir()) == []  # unlink=1 on the server side
    finally:
        server.terminate()
        server.wait(30)


def test_the_job_pod_script_runs_fio_and_cleans_up_on_sigterm(tmp_path):
    """The rendered pod command, run here with the kubelet's $(POD_NAME) expansion done by hand."""
    spec = SaturationSpec(directory="/store", mode="job", claim="ckpt", mount_path=str(tmp_path), size="8m",
                          numjobs=1, bs="64k", iodepth=4, max_seconds=120)
    container = render_fio_job(spec)["spec"]["template"]["spec"]["containers"][0]
    command = [part.replace("$(POD_NAME)", "pod-0") for part in container["command"]]
    command[0] = "/bin/sh"
    pod = subprocess.Popen(command, stdout=subprocess.PIPE, env={**os.environ, "PATH": os.path.dirname(fio_binary())
                                                                  + ":" + os.environ.get("PATH", "")})
    workdir = tmp_path / ".drills-fio-drills-fio-saturation" / "pod-0"
    assert wait_until(lambda: any(workdir.glob("drills-saturate.*")))
    pod.send_signal(signal.SIGTERM)  # what the kubelet sends on Job deletion
    out, _ = pod.communicate(timeout=30)
    assert pod.returncode == 143
    assert all_fio_under(tmp_path) == []
    assert not workdir.exists()
    assert parse_fio_output(out.decode()).jobs == ("drills-saturate",)  # the report is in the pod log


def test_journal_entry_reverts_a_local_saturation_even_before_it_was_marked_injected(store, tmp_path):
    """A SIGKILL between starting fio and `mark_injected`: `drills revert` finds fio by its files directory."""
    from drills.faults.storage import saturation as storage
    from drills.core.journal import Journal, revert_open
    from drills.faults import reverter

    spec = small_spec(store)
    files_dir = storage.new_files_dir(spec)
    journal = Journal(tmp_path / "run" / "journal.jsonl", run_id="run")
    journal.open_entry(storage.KIND, str(store), storage.revert_spec(spec, files_dir))
    record = start_local(spec, files_dir=files_dir)
    assert leftover_fio(record)
    outcomes = revert_open(tmp_path, "run", reverter)
    assert [o.reverted for o in outcomes] == [True]
    assert leftover_fio(record) == [] and list(store.iterdir()) == []
