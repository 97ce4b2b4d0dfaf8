"""Storage saturation in job mode against the twin's API: the rendered batch/v1 Job is created, its pods
run (spread over nodes), the revert deletes the Job and every pod, a journal entry reverts alone
(`drills revert` path), and a leftover Job is refused with one line."""

from __future__ import annotations

import pytest

from drills.core.errors import InjectionFailed
from drills.faults.storage import saturation as storage
from drills.faults.storage.job import inject_job, revert_job
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
    return storage.SaturationSpec(directory="/store", mode="job", namespace=NS, claim="ckpt-store", parallelism=2,
                                  job_name="drills-fio-test", max_seconds=600,
                                  tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}], **kw)


def _job_pods(cluster, name="drills-fio-test") -> list:
    return cluster.core.list_namespaced_pod(NS, label_selector=f"job-name={name}").items


def test_job_mode_runs_fio_pods_and_revert_deletes_them(cluster):
    record = inject_job(cluster, _spec(), start_timeout_s=600)
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
    record = inject_job(cluster, spec, start_timeout_s=600)
    journal.mark_injected(entry_id, record.to_dict())
    outcomes = revert_open(tmp_path, "run", reverter)  # what `drills revert` does after a SIGKILL
    assert [o.reverted for o in outcomes] == [True]
    assert _job_pods(cluster) == []


def test_a_leftover_job_is_refused_in_one_line(cluster):
    inject_job(cluster, _spec(), start_timeout_s=600)
    try:
        with pytest.raises(InjectionFailed, match="already exists .*drills revert"):
            inject_job(cluster, _spec(), start_timeout_s=600)
    finally:
        revert_job(cluster, NS, "drills-fio-test")


def test_pods_that_cannot_run_fail_the_injection_with_the_schedulers_reason(cluster):
    spec = storage.SaturationSpec(directory="/store", mode="job", namespace=NS, claim="ckpt-store", parallelism=2,
                                  job_name="drills-fio-test", max_seconds=600)  # no toleration for the GPU taint
    try:
        with pytest.raises(InjectionFailed, match="0 of 2 fio pods .* untolerated taint"):
            inject_job(cluster, spec, start_timeout_s=300)
    finally:
        revert_job(cluster, NS, "drills-fio-test")
    assert _job_pods(cluster) == []
