"""Distributed locust as Kubernetes pods against the twin's gateway: a master Job, a worker Job of 2 pods and the
master's Service are created, the twin runs their locust containers as real processes (the worker reaches the
master through the Service's name), the results come back through the pods' logs into the same files a local run
writes, and stopping — or a failed start, or the journal's revert after a crash — leaves no pod, Job or Service.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

from drills.core.errors import InjectionFailed
from drills.core.journal import Journal, revert_open
from drills.core.kube import connect_twin
from drills.faults import load as load_fault
from drills.faults import reverter
from drills.load import LoadRunner
from drills.load.podrunner import PodLoadRunner
from drills.load.pods import LABELS, pod_selector
from tests.e2e.drill_helpers import twin_locust_processes_left

pytestmark = pytest.mark.slow

NS = "ai-platform"
GPU_TAINT = [{"key": "nvidia.com/gpu", "operator": "Exists"}]  # every node of the minimal twin carries it


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    from drills.twin.launcher import start_twin

    handle = start_twin(tmp_path_factory.mktemp("twin"), profile="minimal", scale=60.0)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def cluster(twin):
    conn = connect_twin(twin.kubeconfig, twin.url)
    try:
        yield conn
    finally:
        conn.close()


def _runner(twin, cluster, out: Path, **kw) -> PodLoadRunner:
    opts = {"tolerations": GPU_TAINT, **kw.pop("pod_options", {})}
    return PodLoadRunner(twin.info["gateway"], cluster=cluster, namespace=NS, image="registry.example.com/gpu-drills:0.1.0",
                         workers=2, users=4, spawn_rate=40, out_dir=out, model="llama-7b", wait_s=(0.02, 0.04), run_time_limit_s=120,
                         latency_scale=twin.scale, start_timeout_s=60, pod_options=opts, **kw)


def _ours(cluster, name: str) -> dict[str, list[str]]:
    from kubernetes import client

    sel = pod_selector(name)
    return {"pods": [p.metadata.name for p in cluster.core.list_namespaced_pod(NS, label_selector=sel).items],
            "jobs": [j.metadata.name for j in client.BatchV1Api(cluster.api).list_namespaced_job(NS, label_selector=sel).items],
            "services": [s.metadata.name for s in cluster.core.list_namespaced_service(NS, label_selector=sel).items]}


def _wait(cond, what: str, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while not (value := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def test_master_and_two_worker_pods_load_the_gateway_and_aggregate_like_local(twin, cluster, tmp_path):
    runner = _runner(twin, cluster, tmp_path / "pods")
    with runner:
        pods = runner.pods()
        assert sorted(pods) == ["master", "w0", "w1"]
        objects = _ours(cluster, runner.name)
        assert sorted(objects["pods"]) == sorted(pods.values())
        assert sorted(objects["jobs"]) == [f"{runner.name}-master", f"{runner.name}-worker"]
        assert objects["services"] == [runner.name]
        pod = cluster.core.read_namespaced_pod(pods["w0"], NS)
        assert {k: pod.metadata.labels[k] for k in LABELS} == LABELS
        assert "--master-host" in pod.spec.containers[0].command and runner.name in pod.spec.containers[0].command
        # both workers send: their buckets come back through their logs
        _wait(lambda: all(f.exists() and f.stat().st_size for f in runner.bucket_files), "both workers' buckets")
        _wait(lambda: sum(e["num_requests"] for e in runner.summary()), "the master's summary (workers report every 3 s)")
    result = runner.stop()
    assert result.requests > 0 and result.failures == 0, result.errors()
    assert len(result.summary) >= 1 and 0 < sum(e["num_requests"] for e in result.summary) <= result.requests
    assert _ours(cluster, runner.name) == {"pods": [], "jobs": [], "services": []}
    assert not twin_locust_processes_left(twin)

    local = LoadRunner(twin.info["gateway"], users=2, spawn_rate=20, out_dir=tmp_path / "local", workers=2, model="llama-7b",
                       wait_s=(0.02, 0.04), run_time_limit_s=60, latency_scale=twin.scale)
    with local:
        _wait(lambda: all(f.exists() and f.stat().st_size for f in local.bucket_files), "the local workers' buckets")
    expected = local.stop()
    # the same aggregate, the same files, the same summary shape
    assert sorted(result.files) == sorted(expected.files)
    assert sorted(result.to_dict()) == sorted(expected.to_dict())
    assert sorted(result.summary[0]) == sorted(expected.summary[0])
    for name in ("locust_stats.csv", "locust_failures.csv"):
        assert _header(tmp_path / "pods" / name) == _header(tmp_path / "local" / name)


def test_a_load_whose_pods_cannot_run_fails_the_start_and_leaves_nothing(twin, cluster, tmp_path):
    # pinned to the GPU nodes without their toleration (on the system pool the pods would run)
    runner = _runner(twin, cluster, tmp_path / "stuck", pod_options={"tolerations": [], "node_selector": {
        "gpu-drills.io/role": "inference"}}, pod_start_timeout_s=120)
    with pytest.raises(InjectionFailed, match="of 3 locust pods .* untolerated taint"):
        runner.start()
    assert _ours(cluster, runner.name) == {"pods": [], "jobs": [], "services": []}


def test_the_journal_reverts_a_pod_load_left_by_a_killed_run(twin, cluster, tmp_path):
    """What `drills revert` does after a SIGKILL: the journal's undo names the objects before they exist."""
    runner = _runner(twin, cluster, tmp_path / "killed")
    plan = load_fault.plan(None, None, runner=runner)
    assert plan.undo["pods"] == {"namespace": NS, "name": runner.name} and plan.reach.namespaces == (NS,)
    journal = Journal(tmp_path / "run" / "journal.jsonl", run_id="run")
    entry_id = journal.open_entry(load_fault.KIND, plan.target, dict(plan.undo), connection=cluster.describe())
    runner.start()  # and the run dies here: nobody calls stop()
    journal.mark_injected(entry_id, json.loads(json.dumps(load_fault.record(runner))))
    assert len(_ours(cluster, runner.name)["pods"]) == 3
    outcomes = revert_open(tmp_path, "run", reverter)
    assert [o.reverted for o in outcomes] == [True]
    assert _ours(cluster, runner.name) == {"pods": [], "jobs": [], "services": []}
    assert not twin_locust_processes_left(twin)
    import atexit

    atexit.unregister(runner.stop)


def _header(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as fh:
        return next(csv.reader(fh))
