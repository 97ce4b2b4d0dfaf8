"""Job mode's files on the store (drills/faults/storage/sweep.py) and the twin's side of them: the one path of the
Job's files directory and its grammar, what the journal keeps to mount the store as fio did, how a listing reads,
and the twin container's `test`/`rm` (read-only mounts and a store that refuses unlinking) and fio's directory."""

from __future__ import annotations


import pytest

from drills.core.errors import InvalidProfile
from drills.faults.storage import saturation as storage
from drills.faults.storage.sweep import Leftovers, files_root
from drills.twin.workloads import container_files
from drills.twin.workloads.fio_pods import _volume_relpath


def _spec(**kw) -> storage.SaturationSpec:
    return storage.SaturationSpec(directory="/store", mode="job", namespace="ai-platform", claim="ckpt-store", **kw)


def test_the_files_directory_is_the_mount_and_the_jobs_name_and_nothing_else():
    assert files_root("/store/", "drills-fio-saturation") == "/store/.drills-fio-drills-fio-saturation"
    assert files_root("/mnt/ckpt", "x") == "/mnt/ckpt/.drills-fio-x"


@pytest.mark.parametrize("mount, job", [("/store/../etc", "j"), ("store", "j"), ("/st ore", "j"), ("/store", "a/b"),
                                        ("/store", "$(HOME)"), ("/store", "../x"), ("/store", ""), ("/store", "J")])
def test_a_path_outside_the_grammar_is_refused_before_anything_runs(mount, job):
    with pytest.raises(InvalidProfile):
        files_root(mount, job)


def test_the_rendered_job_writes_under_the_swept_directory():
    script = storage.render_fio_job(_spec())["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert f"D='{files_root('/store', 'drills-fio-saturation')}/$(POD_NAME)'" in script


def test_the_journal_keeps_what_mounting_the_store_as_fio_needs():
    undo = storage.revert_spec(_spec(run_as_user=1000, run_as_group=1000, fs_group=None, mount_path="/mnt/ckpt"))
    assert undo == {"mode": "job", "namespace": "ai-platform", "job_name": "drills-fio-saturation",
                    "claim": "ckpt-store", "mount_path": "/mnt/ckpt", "image": storage.DEFAULT_IMAGE,
                    "run_as_user": 1000, "run_as_group": 1000, "fs_group": None}


def test_a_listing_says_what_is_there_and_how_much_more():
    src = "test -e + find /s/.drills-fio-j in pod ns/p (pvc/c, read-only) @ t"
    assert Leftovers("/s/.drills-fio-j", False, (), 0, src).value() == "absent"
    assert Leftovers("/s/.drills-fio-j", True, (), 0, src).value() == "present, empty"
    many = Leftovers("/s/.drills-fio-j", True, ("p1", "p1/drills-saturate.0.0"), 14, src)
    assert many.value() == "present, 14 entries: p1, p1/drills-saturate.0.0, … 12 more"


def test_the_twin_containers_test_answers_by_exit_code(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    where = {"/store": tmp_path}
    assert [container_files.test(where, [op, p]).code for op, p in
            (("-e", "/store/d"), ("-d", "/store/d"), ("-e", "/store/f"), ("-d", "/store/f"), ("-e", "/store/no"),
             ("-e", "/elsewhere"))] == [0, 0, 0, 1, 1, 1]
    assert container_files.test(where, ["-x", "/store/d"]).code == 2


def test_the_twin_containers_rm_removes_exactly_the_path_unless_read_only_or_the_store_refuses(tmp_path):
    (tmp_path / "keep").mkdir()
    (tmp_path / "gone" / "pod").mkdir(parents=True)
    (tmp_path / "gone" / "pod" / "drills-saturate.0.0").write_bytes(b"0" * 10)
    where = {"/store": tmp_path}
    refused = container_files.rm(where, {"/store"}, False, ["-rf", "--", "/store/gone"])
    assert refused.code == 1 and refused.stderr == b"rm: can't remove '/store/gone': Read-only file system\n"
    locked = container_files.rm(where, set(), True, ["-rf", "--", "/store/gone"])
    assert locked.code == 1 and b"Operation not permitted" in locked.stderr and (tmp_path / "gone").exists()
    assert container_files.rm(where, set(), False, ["-rf", "--", "/store/gone"]).code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]
    assert container_files.rm(where, set(), False, ["-rf", "--", "/store/gone"]).code == 0  # -f: missing is fine
    assert container_files.rm(where, set(), False, ["-x", "/store/keep"]).code == 1 and (tmp_path / "keep").exists()


def test_the_twin_runs_a_pods_fio_where_its_script_says_on_the_volume():
    pod = {"metadata": {"name": "job-abc12"}, "spec": storage.render_fio_job(_spec())["spec"]["template"]["spec"]}
    assert _volume_relpath(pod, "fio") == ".drills-fio-drills-fio-saturation/job-abc12"
    pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] = "/data"  # D is on no volume
    assert _volume_relpath(pod, "fio") is None
    pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] = "/store"
    pod["spec"]["containers"][0]["command"][2] = "D=/store/../x\nfio --output-format=json"
    assert _volume_relpath(pod, "fio") is None


def _report(tmp_path, hosts: list[tuple[str, int]], total: bool = True) -> str:
    """fio's client/server JSON as the controlling fio prints it (per-client entries carry hostname and port; with
    several clients an "All clients" total follows), with its text preamble."""
    import json

    stats = [{"jobname": "drills-saturate", "hostname": h, "port": p} for h, p in hosts]
    stats += [{"jobname": "All clients", "hostname": hosts[-1][0], "port": hosts[-1][1]}] if total else []
    path = tmp_path / "fio.json"
    path.write_text("<vm> Starting 1 process\n" + json.dumps({"fio version": "fio-3.33", "client_stats": stats}))
    return str(path)


def test_the_servers_jobs_end_is_confirmed_by_every_servers_results_or_fios_own_time_limit(tmp_path):
    from datetime import datetime, timedelta, timezone

    from drills.faults.storage.clients import servers_ended

    now = datetime.now(timezone.utc)
    running = {"started": now.isoformat(), "max_seconds": 600}
    both = _report(tmp_path, [("10.0.0.1", 8765), ("10.0.0.1", 8765), ("10.0.0.2", 8765)])
    assert servers_ended({**running, "output": both}, 2)[:2] == (
        True, "ended: the controlling fio's report holds all 2 servers' results")
    one = _report(tmp_path, [("10.0.0.1", 8765)], total=False)
    ended, value, source = servers_ended({**running, "output": one}, 2)
    assert not ended and value.startswith("not confirmed: the controlling fio left results of 1 of 2 servers (killed?)")
    assert source == f"fio report {one}"
    (tmp_path / "fio.json").write_text("<vm> Starting 1 process\n")  # killed before its report
    assert servers_ended({**running, "output": one}, 2)[1].startswith("not confirmed: the controlling fio left no "
                                                                      "readable report")
    past = {"started": (now - timedelta(seconds=601)).isoformat(), "max_seconds": 600, "output": one}
    assert servers_ended(past, 2)[0] is True and servers_ended(past, 2)[1].startswith("ended by fio's own time limit")
    assert servers_ended(None, 2)[0] is False
