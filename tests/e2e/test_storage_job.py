"""Storage saturation in job mode against the twin's API: the rendered batch/v1 Job is created, its pods
run (spread over nodes), the revert deletes the Job and every pod, a journal entry reverts alone
(`drills revert` path), and a leftover Job is refused with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.core.errors import InjectionFailed
from drills.faults.storage import saturation as storage
from drills.core.clock import parse_iso
from drills.faults.storage.job import inject_job, revert_job, wait_for_reports
from drills.measure.fio_report import sum_results
from drills.core.journal import Journal, revert_open
from drills.faults import reverter
from drills.core.kube import connect_twin

NS = "ai-platform"


@pytest.fixture
def cluster(twin_factory):
    twin = twin_factory(scale=600.0)
    conn = connect_twin(twin.kubeconfig, twin.url)
    try:
        yield conn
    finally:
        conn.close()


def _spec(**kw) -> storage.SaturationSpec:
    """Small files, one job per pod: the twin runs each pod's fio for real on its store (fio_pods.py); 6000
    cluster seconds are 10 s of fio at scale 600, longer than the checks that expect it running."""
    kw = {"parallelism": 2, "max_seconds": 6000, **kw}
    return storage.SaturationSpec(directory="/store", mode="job", namespace=NS, claim="ckpt-store",
                                  job_name="drills-fio-test", size="8m", numjobs=1, rw="write", iodepth=4,
                                  tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}], **kw)


def _job_pods(cluster, name="drills-fio-test") -> list:
    return cluster.core.list_namespaced_pod(NS, label_selector=f"job-name={name}").items


def test_job_mode_runs_fio_pods_and_revert_deletes_them(cluster):
    record = inject_job(cluster, _spec(), start_timeout_s=6000)
    assert len(record.pods) == 2 and record.uid
    pods = _job_pods(cluster)
    assert {p.metadata.name for p in pods} == set(record.pods)
    assert all(p.status.phase == "Running" for p in pods)
    container = pods[0].spec.containers[0]
    assert container.command[:2] == ["/bin/sh", "-c"] and "--time_based" in container.command[2]
    assert pods[0].spec.volumes[0].persistent_volume_claim.claim_name == "ckpt-store"
    revert_job(cluster, NS, "drills-fio-test")
    assert _job_pods(cluster) == []
    from kubernetes import client

    assert not [j for j in client.BatchV1Api(cluster.api).list_namespaced_job(NS).items
                if j.metadata.name == "drills-fio-test"]
    revert_job(cluster, NS, "drills-fio-test")  # idempotent


def test_journal_entry_reverts_a_job_alone(cluster, tmp_path):
    spec = _spec()
    journal = Journal(tmp_path / "run" / "journal.jsonl", run_id="run")
    entry_id = journal.open_entry(storage.KIND, spec.job_name, storage.revert_spec(spec), connection=cluster.describe())
    record = inject_job(cluster, spec, start_timeout_s=6000)
    journal.mark_injected(entry_id, record.to_dict())
    outcomes = revert_open(tmp_path, "run", reverter)  # what `drills revert` does after a SIGKILL
    assert [o.reverted for o in outcomes] == [True]
    assert _job_pods(cluster) == []


def test_a_leftover_job_is_refused_in_one_line(cluster):
    inject_job(cluster, _spec(), start_timeout_s=6000)
    try:
        with pytest.raises(InjectionFailed, match="already exists .*drills revert"):
            inject_job(cluster, _spec(), start_timeout_s=6000)
    finally:
        revert_job(cluster, NS, "drills-fio-test")


def test_pods_that_cannot_run_fail_the_injection_with_the_schedulers_reason(cluster):
    spec = storage.SaturationSpec(directory="/store", mode="job", namespace=NS, claim="ckpt-store", parallelism=2,
                                  job_name="drills-fio-test", max_seconds=600,  # no toleration for the GPU taint
                                  node_selector={"gpu-drills.io/role": "training"})  # (the system pool has none)
    try:
        with pytest.raises(InjectionFailed, match="0 of 2 fio pods .* untolerated taint"):
            inject_job(cluster, spec, start_timeout_s=300)
    finally:
        revert_job(cluster, NS, "drills-fio-test")
    assert _job_pods(cluster) == []


def test_job_mode_waits_for_every_pods_report_and_sums_them(cluster):
    """Three pods, three fio reports read once fio ended by its time limit (not the first pod's log while fio
    still runs), summed: the store's load is what all storage clients did together."""
    record = inject_job(cluster, _spec(parallelism=3, max_seconds=1800), start_timeout_s=6000)
    try:
        # fio runs for real, on wall time (3 s here; 4 s for the whole wait on a quiet machine): on a busy one its
        # start, its file layout through the twin's store and its report are many minutes of a 600× clock. Six
        # hours of slack (36 s of wall) only bound the wait: the reports end it as soon as all three are in.
        deadline = parse_iso(record.injected_at).timestamp() + record.max_seconds + 6 * 3600
        reports = wait_for_reports(cluster, NS, record.job_name, deadline)
        assert reports.missing == () and sorted(reports.pods) == sorted(record.pods) and len(reports.results) == 3
        assert all(r.write.io_bytes > 0 and r.job_errors == (0,) for r in reports.results)
        assert {p.status.phase for p in _job_pods(cluster)} == {"Succeeded"}  # fio ended: the pods completed
        total = sum_results(list(reports.results))
        assert total.write.io_bytes == sum(r.write.io_bytes for r in reports.results)
        assert total.write.bw_bytes_s == sum(r.write.bw_bytes_s for r in reports.results)
        assert total.jobs == ("drills-saturate #1", "drills-saturate #2", "drills-saturate #3")
        assert reports.ended_at and parse_iso(reports.ended_at) >= parse_iso(record.injected_at)
    finally:
        revert_job(cluster, NS, record.job_name)
    assert _job_pods(cluster) == []


def test_a_pod_whose_fio_is_still_running_at_the_deadline_is_named_not_dropped(cluster):
    record = inject_job(cluster, _spec(parallelism=2, max_seconds=60000), start_timeout_s=6000)
    try:
        reports = wait_for_reports(cluster, NS, record.job_name, cluster.clock.timestamp() + 60)
        assert reports.results == () and len(reports.missing) == 2
        assert all(m.endswith("fio still running at the deadline") for m in reports.missing)
    finally:
        revert_job(cluster, NS, record.job_name)


def test_per_node_mode_puts_one_pod_on_each_selected_node(cluster, tmp_path):
    """One fio pod per node matching node_selector, kept apart by a required anti-affinity (the twin's scheduler
    honours it): 4 training nodes, 4 pods, 4 distinct nodes — and a cordoned node gets none."""
    from drills.faults import Target
    from drills.profile.model import parse_profile

    cluster.core.patch_node("gpu-train-04", {"spec": {"unschedulable": True}})
    profile = parse_profile(
        "storage:\n  saturation: {mode: job, per_node: true, claim: ckpt-store, namespace: ai-platform, size: 8M,\n"
        "    numjobs: 1, iodepth: 4, rw: write, runtime_s: 6000, start_timeout_s: 6000,\n"
        "    node_selector: {gpu-drills.io/role: training}, tolerations: [{key: nvidia.com/gpu, operator: Exists}]}\n")
    target = Target(cluster, run_dir=tmp_path)
    plan = storage.plan(target, profile, directory="/store")
    assert "3 pods" in plan.description and "one on each of gpu-train-01, gpu-train-02, gpu-train-03" in plan.description
    record = storage.inject(target, plan)
    try:
        pods = _job_pods(cluster, record["job_name"])
        assert sorted(p.spec.node_name for p in pods) == ["gpu-train-01", "gpu-train-02", "gpu-train-03"]
        assert pods[0].spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
    finally:
        storage.revert(target, plan.undo, record)
    assert _job_pods(cluster, record["job_name"]) == []


def test_the_storage_drill_in_job_mode_sums_every_pods_report(tmp_path):
    """Through the drill: the saturation ends when the pods' fio ends, and the report judged is the sum of the
    three pods' (fixtures/storage.py), not the first pod's log read while fio still ran."""
    from tests.e2e.drill_helpers import drills, records, write_profile

    profile = write_profile(tmp_path / "job.yaml", """\
storage:
  checkpoint_store: from-twin
  probe_size_mb: 4
  probe_shards: 4
  probe_save_limit_s: 5s
  saturation: {mode: job, claim: ckpt-store, namespace: ai-platform, parallelism: 3, rw: write, block_size: 1M,
               size: 16M, numjobs: 1, iodepth: 2, runtime_s: 3m, tolerations: [{key: nvidia.com/gpu, operator: Exists}]}
safety:
  allow: {nodes: ["*"], namespaces: [ai-platform]}
# What is judged here is the summing of the three pods' reports. Three fio pods slow the job's save to 1.9× its
# baseline on a quiet machine and 2.04× with two busy loops (fio runs for real: a starved CPU stretches it on the
# twin's clock), and a failed save check ends the drill before fio's reports are read. The 2× budget has its own
# tests (test_drill_storage.py, test_drill_targets.py); this site sets 3×, as a site may.
slo: {checkpoint_save_ratio: 3}
""")
    proc = drills("run", "-m", "storage", "--profile", profile, "--no-html", "--reports", str(tmp_path / "r"),
                  "--run-id", "job", timeout=600)
    (rec,) = records(tmp_path / "r" / "job")
    fio = rec["details"].get("fio")  # absent when the drill ended before the saturation: say why
    assert fio is not None, (rec["verdict"], rec["reason"], proc.stdout[-3000:], proc.stderr[-2000:])
    assert fio["jobs"] == ["drills-saturate #1", "drills-saturate #2", "drills-saturate #3"]
    assert fio["write"]["io_bytes"] > 0 and fio["job_errors"] == [0, 0, 0]
    checks = {c["name"]: c["verdict"] for c in rec["details"]["checks"]}
    assert checks.get("saturation effect") == "pass", rec["reason"]


def _files_of(twin, name="drills-fio-test") -> list:
    """The twin's truth: what is under the Job's directory on the store (the directory the PVC backs)."""
    from pathlib import Path

    root = Path(twin.info["checkpoint_store"]) / f".drills-fio-{name}"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def _until_files(twin, pods: tuple = (), timeout_s: float = 30.0) -> list:
    """The store's files once fio wrote one (in each of `pods`' directories, when named)."""
    import time

    def written() -> bool:
        files = [f for f in _files_of(twin) if "drills-saturate." in f]
        return bool(files) and all(any(f"{pod}/drills-saturate." in f for f in files) for pod in pods)

    deadline = time.monotonic() + timeout_s
    while not written():
        assert time.monotonic() < deadline, f"fio wrote no file on the twin's store (pods {pods})"
        time.sleep(0.05)
    return _files_of(twin)


def test_fio_killed_without_its_cleanup_leaves_files_the_revert_sweeps_and_reads_gone(twin_factory):
    """Issue 30, class 2, job mode (defect fio-files-left): fio ignores SIGTERM, the kubelet kills the container, the
    trap never runs — the Job's pods are gone, fio's files are not. Before: the revert deleted the Job and the
    verify read only "no pod of the Job left" (PASS, files on the checkpoint store). Now the verify lists the
    store's directory through a read-only pod on the same claim (not undone, naming what was listed, by which pod,
    when), the revert removes exactly that directory and reads it again, and the read-back says absent; a sweep pod
    a killed revert left is found by its labels and deleted."""
    from drills.faults import Target, store_reader
    from drills.faults.storage.job import pods_of
    from drills.faults.storage.sweep import SWEEP_LABEL

    twin = twin_factory(defects=["fio-files-left"], scale=600.0)
    cluster = connect_twin(twin.kubeconfig, twin.url)
    try:
        spec, target = _spec(), Target(cluster)
        undo = storage.revert_spec(spec)
        record = inject_job(cluster, spec, start_timeout_s=6000)
        written = _until_files(twin, tuple(record.pods))
        revert_job(cluster, NS, spec.job_name)  # what the revert was: the Job and its pods deleted
        assert pods_of(cluster, NS, spec.job_name) == []  # ... and all its verify read: PASS, before
        assert [f for f in _files_of(twin) if "drills-saturate." in f], written  # the truth: the files stayed

        reading = storage.verify(target, undo, record.to_dict())
        pods, files = reading.observations
        assert reading.undone is False and pods.ok and not files.ok, reading.to_dict()
        assert files.object == "fio files /store/.drills-fio-drills-fio-test on pvc/ckpt-store"
        assert files.value.startswith("present, ") and f"{record.pods[0]}/drills-saturate." in files.value
        assert f"in pod {NS}/drills-fio-test-read-" in files.source and "read-only) @ 20" in files.source
        assert reading.left == ("/store/.drills-fio-drills-fio-test",)

        killed = store_reader.pod_body(NS, "drills-fio-test-sweep-0dead0", spec.image, [], [])  # a killed revert's
        killed["metadata"]["labels"] = {store_reader.ROLE_LABEL: "store-sweep", SWEEP_LABEL: spec.job_name}
        cluster.core.create_namespaced_pod(NS, killed)
        assert storage.revert(target, undo, record.to_dict()) == "reverted"  # the sweep (and that pod deleted)
        assert _files_of(twin) == [] and not (Path(twin.info["checkpoint_store"]) / ".drills-fio-drills-fio-test").exists()
        after = storage.verify(target, undo, record.to_dict())
        assert after.undone is True and after.observations[1].value == "absent", after.to_dict()
        assert cluster.core.list_namespaced_pod(NS, label_selector=SWEEP_LABEL).items == []  # no reader left
        assert storage.revert(target, undo, record.to_dict()) == "reverted"  # idempotent: nothing there
    finally:
        cluster.close()


def test_leftovers_the_store_will_not_unlink_are_revert_failed_naming_what_was_read(twin_factory, tmp_path):
    """Defect fio-files-locked (fio killed without its cleanup, a store under a retention lock): the sweep's `rm`
    is refused, so the revert fails naming the listing and rm's answer; `drills revert` (the journal replayed
    after a SIGKILL) fails the same way and finds no sweep pod of ours left behind."""
    from drills.core.errors import RevertFailed
    from drills.faults import Target
    from drills.faults.storage.sweep import SWEEP_LABEL

    twin = twin_factory(defects=["fio-files-locked"], scale=600.0)
    cluster = connect_twin(twin.kubeconfig, twin.url)
    try:
        spec, target = _spec(parallelism=1), Target(cluster)
        journal = Journal(tmp_path / "run" / "journal.jsonl", run_id="run")
        entry_id = journal.open_entry(storage.KIND, spec.job_name, storage.revert_spec(spec),
                                      connection=cluster.describe())
        record = inject_job(cluster, spec, start_timeout_s=6000)
        journal.mark_injected(entry_id, record.to_dict())
        _until_files(twin)
        with pytest.raises(RevertFailed) as failed:
            storage.revert(target, storage.revert_spec(spec), record.to_dict())
        assert "fio's files /store/.drills-fio-drills-fio-test on pvc/ckpt-store are still there after `rm -rf`" \
            in str(failed.value) and "Operation not permitted" in str(failed.value), failed.value
        assert f"{record.pods[0]}/drills-saturate." in str(failed.value)
        outcomes = revert_open(tmp_path, "run", reverter)  # `drills revert`
        assert [o.reverted for o in outcomes] == [False]
        assert _files_of(twin) and cluster.core.list_namespaced_pod(NS, label_selector=SWEEP_LABEL).items == []
    finally:
        cluster.close()
