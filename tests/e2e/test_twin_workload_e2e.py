"""Workload controllers with the twin's scheduler and kubelets: the seeded training job survives a
drain by restarting as a whole, and the seeded inference Deployment replaces a killed pod."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from kubernetes import client

from fixtures.twin import api_client_for
from twin_workload_helpers import wait_for

NS, JOB, DEPLOY = "ai-platform", "llm-finetune-8b", "llama-7b-infer"


@pytest.fixture
def seeded(twin_factory):
    handle = twin_factory(profile="minimal", scale=60)
    api = api_client_for(handle)
    try:
        yield handle, api
    finally:
        api.close()


def _job_status(co):
    return co.get_namespaced_custom_object("batch.volcano.sh", "v1alpha1", NS, "jobs", JOB).get("status") or {}


def _job_pods(core):
    pods = core.list_namespaced_pod(NS, label_selector=f"volcano.sh/job-name={JOB}").items
    return sorted((p for p in pods if not p.metadata.deletion_timestamp), key=lambda p: p.metadata.name)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")
def test_drain_restarts_the_training_job_elsewhere(seeded):
    handle, api = seeded
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    wait_for(lambda: _job_status(co).get("state", {}).get("phase") == "Running", "the seeded job Running")
    before = _job_pods(core)
    node = before[0].spec.node_name
    done = subprocess.run(["kubectl", "--kubeconfig", handle.kubeconfig, "drain", node, "--ignore-daemonsets",
                           "--timeout=60s"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    status = wait_for(lambda: (s := _job_status(co)).get("retryCount") == 1
                      and s.get("state", {}).get("phase") == "Running" and s, "the job Running again")
    assert [c["status"] for c in status["conditions"]][-3:] == ["Restarting", "Pending", "Running"]
    after = wait_for(lambda: len(p := [x for x in _job_pods(core) if x.status.phase == "Running"]) == 2 and p,
                     "2 running workers")
    assert not {p.metadata.uid for p in before} & {p.metadata.uid for p in after}
    assert node not in {p.spec.node_name for p in after}
    reasons = {e.reason for e in core.list_namespaced_event(NS, field_selector=f"involvedObject.name={JOB}").items}
    assert "RestartJob" in reasons


def test_killed_inference_pod_is_replaced_and_deployment_recovers(seeded):
    _, api = seeded
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    wait_for(lambda: apps.read_namespaced_deployment(DEPLOY, NS).status.available_replicas == 2, "2 available")
    pods = core.list_namespaced_pod(NS, label_selector=f"app={DEPLOY}").items
    core.delete_namespaced_pod(pods[0].metadata.name, NS)
    fresh = wait_for(lambda: [p for p in core.list_namespaced_pod(NS, label_selector=f"app={DEPLOY}").items
                              if p.metadata.uid != pods[0].metadata.uid and p.metadata.uid != pods[1].metadata.uid],
                     "a replacement pod")
    st = wait_for(lambda: (s := apps.read_namespaced_deployment(DEPLOY, NS).status).available_replicas == 2
                  and s.ready_replicas == 2 and s, "2 available again")
    assert fresh[0].metadata.name.startswith(f"{DEPLOY}-")
    conds = {c.type: c for c in st.conditions}
    assert conds["Available"].status == "True"
    now = {p.metadata.uid for p in core.list_namespaced_pod(NS, label_selector=f"app={DEPLOY}").items
           if not p.metadata.deletion_timestamp}
    assert pods[0].metadata.uid not in now and len(now) == 2
    wait_for(lambda: sum(len(s.addresses or ()) for s in core.read_namespaced_endpoints(DEPLOY, NS).subsets or ())
             == 2, "both replicas in the Service's endpoints")
