"""The twin's Volcano Job controller: PodGroup, pods per task, policies, retries and phases.

Pods select no node, so the tests play kubelet (patch pod status) and eviction (delete a pod) and
watch the job's status the way the GPU-node-loss drill does."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from drills.twin.launcher import start_twin
from fixtures.twin import api_client_for
from twin_workload_helpers import NOWHERE, set_pod_phase, wait_for

VC = ("batch.volcano.sh", "v1alpha1")
PG = ("scheduling.volcano.sh", "v1beta1")


@pytest.fixture(scope="module")
def vc_twin(tmp_path_factory):
    handle = start_twin(tmp_path_factory.mktemp("twin-vc"), profile="minimal", scale=60)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def api(vc_twin):
    api = api_client_for(vc_twin)
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def ns(api):
    name = f"vc-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    yield name
    client.CoreV1Api(api).delete_namespace(name)


def _job(name: str, policies=None, max_retry: int | None = 3, replicas: int = 2) -> dict:
    spec = {"schedulerName": "volcano", "minAvailable": replicas, "queue": "default",
            "plugins": {"env": [], "svc": []},
            "tasks": [{"name": "worker", "replicas": replicas, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"restartPolicy": "Never", "nodeSelector": dict(NOWHERE), "containers": [{
                    "name": "trainer", "image": "registry.local/trainer:1",
                    "resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1024Gi"}}}]}}}]}
    if policies is not None:
        spec["policies"] = policies
    if max_retry is not None:
        spec["maxRetry"] = max_retry
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


RESTART = [{"event": "PodEvicted", "action": "RestartJob"}, {"event": "PodFailed", "action": "RestartJob"}]


class Env:
    def __init__(self, api, ns):
        self.core, self.co, self.ns = client.CoreV1Api(api), client.CustomObjectsApi(api), ns

    def job(self, name):
        return self.co.get_namespaced_custom_object(*VC, self.ns, "jobs", name)

    def status(self, name):
        return self.job(name).get("status") or {}

    def phase(self, name):
        return self.status(name).get("state", {}).get("phase")

    def pods(self, name, *, live=True):
        pods = self.core.list_namespaced_pod(self.ns, label_selector=f"volcano.sh/job-name={name}").items
        return sorted((p for p in pods if not live or not p.metadata.deletion_timestamp), key=lambda p: p.metadata.name)

    def wait_phase(self, name, phase, what=None):
        return wait_for(lambda: self.phase(name) == phase and self.status(name), what or f"{name} {phase}")

    def run_all(self, name, count=2):
        pods = wait_for(lambda: len(p := [x for x in self.pods(name) if x.status.phase == "Pending"]) == count and p,
                        f"{count} pending pods of {name}")
        for pod in pods:
            set_pod_phase(self.core, pod)
        return pods


@pytest.fixture
def env(api, ns):
    return Env(api, ns)


def test_job_creates_podgroup_and_pods_and_runs(env):
    job = env.co.create_namespaced_custom_object(*VC, env.ns, "jobs", _job("train", RESTART))
    uid = job["metadata"]["uid"]
    pg_name = f"train-{uid}"
    pg = wait_for(lambda: _get_pg(env, pg_name), "the PodGroup")
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["minTaskMember"] == {"worker": 2}
    assert pg["spec"]["minResources"]["nvidia.com/gpu"] == "16"
    assert pg["metadata"]["ownerReferences"][0]["uid"] == uid
    pods = wait_for(lambda: len(p := env.pods("train")) == 2 and p, "2 pods")
    assert [p.metadata.name for p in pods] == ["train-worker-0", "train-worker-1"]
    for i, pod in enumerate(pods):
        labels, ann = pod.metadata.labels, pod.metadata.annotations
        assert labels["volcano.sh/job-name"] == "train" and labels["app"] == "train"
        assert ann["volcano.sh/task-spec"] == "worker" and ann["scheduling.k8s.io/group-name"] == pg_name
        assert ann["volcano.sh/job-version"] == "0" and ann["volcano.sh/task-index"] == str(i)
        assert pod.spec.scheduler_name == "volcano" and pod.spec.hostname == pod.metadata.name
        assert pod.spec.subdomain == "train"
        assert ("VC_TASK_INDEX", str(i)) in [(e.name, e.value) for e in pod.spec.containers[0].env]
        ref = pod.metadata.owner_references[0]
        assert (ref.kind, ref.api_version, ref.uid, ref.controller) == ("Job", "batch.volcano.sh/v1alpha1", uid, True)
    status = env.wait_phase("train", "Pending")
    assert status["minAvailable"] == 2 and status["retryCount"] == 0 and status["pending"] == 2

    env.run_all("train")
    status = env.wait_phase("train", "Running")
    assert status["running"] == 2 and status["taskStatusCount"]["worker"]["phase"]["Running"] == 2
    assert [c["status"] for c in status["conditions"]] == ["Pending", "Running"]
    assert all(c["lastTransitionTime"] for c in status["conditions"])
    assert status["state"]["lastTransitionTime"] == status["conditions"][-1]["lastTransitionTime"]
    assert status["runningDuration"].endswith("s")
    wait_for(lambda: (_get_pg(env, pg_name) or {}).get("status", {}).get("phase") == "Running", "PodGroup Running")


def test_evicted_worker_restarts_the_whole_job_until_max_retry(env):
    env.co.create_namespaced_custom_object(*VC, env.ns, "jobs", _job("ft", RESTART, max_retry=3))
    first = env.run_all("ft")
    env.wait_phase("ft", "Running")
    seen_uids = {p.metadata.uid for p in first}

    for attempt in (1, 2):
        env.core.delete_namespaced_pod(f"ft-worker-{attempt % 2}", env.ns)  # the drain's eviction
        status = wait_for(lambda: env.status("ft").get("retryCount") == attempt and env.status("ft"),
                          f"restart {attempt}")
        assert any(c["status"] == "Restarting" for c in status["conditions"])
        fresh = env.run_all("ft")  # all pods were killed and come back with new uids, same names
        assert [p.metadata.name for p in fresh] == ["ft-worker-0", "ft-worker-1"]
        assert not seen_uids & {p.metadata.uid for p in fresh}
        seen_uids |= {p.metadata.uid for p in fresh}
        status = env.wait_phase("ft", "Running")
        # a killed generation's pods carry an older version: their late events only sync
        assert {p.metadata.annotations["volcano.sh/job-version"] for p in fresh} == {str(status["version"])}
        assert status["version"] >= attempt
        phases = [c["status"] for c in status["conditions"]]
        assert phases[-3:] == ["Restarting", "Pending", "Running"]
        assert status["retryCount"] == attempt

    events = env.core.list_namespaced_event(env.ns, field_selector="involvedObject.name=ft").items
    assert "RestartJob" in {e.reason for e in events}

    # the third restart request reaches maxRetry: the job fails and stays down
    env.core.delete_namespaced_pod("ft-worker-0", env.ns)
    status = env.wait_phase("ft", "Failed")
    assert status["retryCount"] == 3
    assert [c["status"] for c in status["conditions"]][-2:] == ["Restarting", "Failed"]
    wait_for(lambda: not env.pods("ft"), "no live pods after Failed")


def test_failed_worker_with_restart_policy_restarts(env):
    env.co.create_namespaced_custom_object(*VC, env.ns, "jobs", _job("pf", RESTART))
    pods = env.run_all("pf")
    env.wait_phase("pf", "Running")
    set_pod_phase(env.core, pods[1], phase="Failed", exit_code=1)  # e.g. an NCCL timeout
    status = wait_for(lambda: env.status("pf").get("retryCount") == 1 and env.status("pf"), "restart on PodFailed")
    assert "Restarting" in [c["status"] for c in status["conditions"]]
    env.run_all("pf")
    env.wait_phase("pf", "Running")


def test_without_policies_an_evicted_pod_is_only_recreated(env):
    """Upstream's default action is SyncJob: the evicted pod comes back alone, the job is not restarted."""
    env.co.create_namespaced_custom_object(*VC, env.ns, "jobs", _job("np", policies=None))
    pods = env.run_all("np")
    env.wait_phase("np", "Running")
    env.core.delete_namespaced_pod("np-worker-1", env.ns)
    back = wait_for(lambda: [p for p in env.pods("np") if p.metadata.name == "np-worker-1"
                             and p.metadata.uid != pods[1].metadata.uid], "np-worker-1 recreated")
    assert back[0].metadata.annotations["volcano.sh/job-version"] == "0"
    survivor = env.core.read_namespaced_pod("np-worker-0", env.ns)
    assert survivor.metadata.uid == pods[0].metadata.uid  # the peer was never restarted
    status = env.status("np")
    assert status["retryCount"] == 0 and status["state"]["phase"] == "Running"
    assert "Restarting" not in [c["status"] for c in status["conditions"]]

    # the survivor's NCCL times out; the replacement never joins: once every pod failed, the job Failed
    set_pod_phase(env.core, survivor, phase="Failed", exit_code=1)
    set_pod_phase(env.core, back[0], phase="Failed", exit_code=1)
    status = env.wait_phase("np", "Failed")
    assert status["retryCount"] == 0 and status["failed"] == 2


def test_max_retry_zero_fails_on_first_restart(env):
    env.co.create_namespaced_custom_object(*VC, env.ns, "jobs", _job("mr", RESTART, max_retry=0))
    env.run_all("mr")
    env.wait_phase("mr", "Running")
    env.core.delete_namespaced_pod("mr-worker-0", env.ns)
    status = env.wait_phase("mr", "Failed")
    assert status["retryCount"] == 1
    assert status["state"]["reason"] == "MaxRetryExceeded"


def test_abort_policy_aborts(env):
    env.co.create_namespaced_custom_object(*VC, env.ns, "jobs",
                                           _job("ab", [{"event": "PodEvicted", "action": "AbortJob"}]))
    env.run_all("ab")
    env.wait_phase("ab", "Running")
    env.core.delete_namespaced_pod("ab-worker-0", env.ns)
    status = env.wait_phase("ab", "Aborted")
    assert [c["status"] for c in status["conditions"]][-2:] == ["Aborting", "Aborted"]


def test_all_succeeded_completes(env):
    env.co.create_namespaced_custom_object(*VC, env.ns, "jobs", _job("ok", RESTART))
    pods = env.run_all("ok")
    env.wait_phase("ok", "Running")
    for pod in pods:
        set_pod_phase(env.core, pod, phase="Succeeded")
    env.wait_phase("ok", "Completed")


def _get_pg(env, name):
    try:
        return env.co.get_namespaced_custom_object(*PG, env.ns, "podgroups", name)
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise
