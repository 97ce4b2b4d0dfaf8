"""The fio wrapper against the real fio binary: ~1 s runs in temp dirs, and every failure as one line."""

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from drills.core.errors import DrillError
from drills.faults.storage.fio import FioJob, run_fio, start_fio, supports_direct

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (make bootstraps it)")


@pytest.fixture(autouse=True)
def own_tempdir(tmp_path, monkeypatch):
    """Temp output directories of run_fio land here, so each test can see that none is left behind."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    yield
    assert list(temp.iterdir()) == []


def fio_pids_mentioning(text: str) -> list[int]:
    """Live fio processes whose command line mentions `text` (zombies do not count)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "fio" in cmdline.split(" ", 1)[0] and text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def written_bytes(pid: int) -> int:
    try:
        lines = Path(f"/proc/{pid}/io").read_text().splitlines()
    except OSError:
        return 0
    return int(dict(line.split(": ") for line in lines)["wchar"])


def test_a_one_second_mixed_run_measures_both_directions(tmp_path):
    job = FioJob(name="e2e-randrw", directory=str(tmp_path / "store"), rw="randrw", bs="4k", size="4m",
                 numjobs=2, iodepth=4, runtime=1, time_based=True, unlink=True)
    result = run_fio(job, timeout=60)
    assert result.job_errors == (0,)
    for direction in (result.read, result.write):
        assert direction.io_bytes > 0 and direction.bw_bytes_s > 0 and direction.iops > 0
        assert 0 < direction.clat_p50_s <= direction.clat_p99_s <= direction.clat_p999_s
    assert result.runtime_s >= 0.9
    assert result.raw["jobs"][0]["job options"]["rw"] == "randrw"
    assert list((tmp_path / "store").iterdir()) == []  # unlink=1 removed the data files


def test_stopping_a_background_run_gives_a_partial_result_and_leaves_no_process(tmp_path):
    job = FioJob(name="e2e-bg", directory=str(tmp_path), rw="randwrite", bs="64k", size="8m", ioengine="psync",
                 runtime=60, time_based=True)
    proc = start_fio(job, output=tmp_path / "out" / "fio.json")
    deadline = time.monotonic() + 30
    while written_bytes(proc.pid) < 16 * 2**20 and time.monotonic() < deadline:
        time.sleep(0.05)  # until fio wrote more than its 8 MiB layout, i.e. the job's own I/O runs
    assert proc.running
    with pytest.raises(DrillError, match="still running"):
        proc.result()
    proc.stop()
    assert not proc.running
    assert fio_pids_mentioning(str(tmp_path)) == []
    result = proc.result()
    assert result.write.io_bytes > 0 and result.read.io_bytes == 0
    assert result.runtime_s < 60


def test_a_run_past_its_timeout_is_stopped_and_reported(tmp_path):
    job = FioJob(name="e2e-slow", directory=str(tmp_path), rw="randread", size="4m", runtime=60, time_based=True)
    with pytest.raises(DrillError, match=r"did not finish within 1 s; it was stopped"):
        run_fio(job, timeout=1)
    assert fio_pids_mentioning(str(tmp_path)) == []


def test_missing_fio_is_one_line_saying_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DRILLS_FIO_BIN", "fio-is-not-installed-here")
    with pytest.raises(DrillError) as err:
        run_fio(FioJob(name="j", directory=str(tmp_path)))
    assert str(err.value) == "fio not found: install it with `apt-get install fio` or run `make drill` as root"


def test_an_unwritable_directory_is_named(tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    target = tmp_path / "a-file" / "store"
    with pytest.raises(DrillError) as err:
        run_fio(FioJob(name="j", directory=str(target)))
    assert str(err.value) == f"fio directory {target} is not writable: Not a directory"


def test_fios_own_error_comes_back_as_one_line(tmp_path):
    job = FioJob(name="j", directory=str(tmp_path), ioengine="no-such-engine", size="1m")
    with pytest.raises(DrillError) as err:
        run_fio(job, timeout=60)
    message = str(err.value)
    assert message.startswith("fio failed: ") and "\n" not in message
    assert "engine no-such-engine not loadable" in message


def test_direct_io_is_probed_where_the_files_go(tmp_path):
    # Reported in the wrapper's note: ext4 /tmp and even tmpfs /dev/shm take O_DIRECT on kernel 6.x.
    store = tmp_path / "store"
    store.mkdir()
    assert supports_direct(store) is True
    assert os.listdir(store) == []
