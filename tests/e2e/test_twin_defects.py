"""Each named defect makes the twin misbehave the way the misconfiguration does on a real cluster.

cold-image-cache, no-gpu-health-check and no-preemption are shown by the kubelet, node-lifecycle and
scheduling tests; roce-no-pfc and single-uplink by the fabric tests; the last test here guards that
every defect file has some end-to-end test naming it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from drills.twin.profile import list_defects
from fixtures.twin import api_client_for
from twin_truth_helpers import DEPLOY, JOB, NS, first, job_pods, logs, records, twin_now, wait_for

SUBJECT = f"{NS}/{JOB}"
E2E = Path(__file__).parent


def _twin(twin_factory, defect: str, scale: float = 600, started: bool = True):
    handle = twin_factory(defects=[defect], scale=scale)
    core = client.CoreV1Api(api_client_for(handle))
    if started:
        wait_for(lambda: first(handle, "job_started", SUBJECT), "the training job to start")
    return handle, core


def _vcjob(core) -> dict:
    return client.CustomObjectsApi(core.api_client).get_namespaced_custom_object("batch.volcano.sh", "v1alpha1", NS,
                                                                                  "jobs", JOB)


def test_nccl_socket_transport_runs_on_sockets_from_the_start(twin_factory):
    handle, core = _twin(twin_factory, "nccl-socket-transport")
    _, events = wait_for(lambda: (got := logs(core, job_pods(core)[0].metadata.name)) and
                         sum(e.kind == "step" for e in got[1]) >= 3 and got, "step lines")
    assert {e.transport for e in events if e.kind == "nccl_transport"} == {"Socket"}
    assert all(e.samples_per_s < 0.3 * 256 for e in events if e.kind == "step")  # 5 of 25 GB/s bus bandwidth
    state = first(handle, "nccl_transport", SUBJECT)
    assert state["transport"] == "Socket"


def test_slow_store_makes_checkpoint_saves_crawl(twin_factory):
    handle, core = _twin(twin_factory, "slow-store", scale=1200)
    saved = wait_for(lambda: [r for r in records(handle, "checkpoint_saved", SUBJECT) if r["step"] == 7500],
                     "the checkpoint at step 7500")[0]  # the first save after the initial one (every 1500 steps)
    assert saved["duration_s"] > 2 * 38  # the store's modelled bandwidth under slow-store: well over the healthy 38 s
    _, events = logs(core, job_pods(core)[0].metadata.name)
    seconds = max(e.duration_s or 0 for e in events if e.kind == "checkpoint_saved" and e.step == 7500)
    assert seconds == pytest.approx(saved["duration_s"], rel=0.05)  # Megatron's save-checkpoint timer says the same


def test_sparse_checkpoints_lose_more_steps_than_the_budget(twin_factory):
    handle, core = _twin(twin_factory, "sparse-checkpoints")
    pod = job_pods(core)[0]
    before = twin_now(handle)
    core.delete_namespaced_pod(pod.metadata.name, NS)
    fault = wait_for(lambda: first(handle, "fault", SUBJECT, since=before), "the lost worker")
    resumed = wait_for(lambda: first(handle, "resumed_from_checkpoint", SUBJECT, since=before), "the resume")
    assert fault["latest_checkpoint"] == resumed["step"] == 200000
    assert fault["step_at_fault"] - resumed["step"] > 2000  # beyond one healthy checkpoint interval


def test_slow_model_load_holds_readiness_for_ten_minutes(twin_factory):
    handle, core = _twin(twin_factory, "slow-model-load", scale=1200, started=False)
    wait_for(lambda: first(handle, "all_ready", f"{NS}/{DEPLOY}"), "the inference replicas to be Ready")
    for pod in core.list_namespaced_pod(NS, label_selector=f"app={DEPLOY}").items:
        assert pod.metadata.annotations["twin.gpu-drills.io/startup-s"] == "600"
        started = pod.status.container_statuses[0].state.running.started_at.timestamp()
        ready = next(c.last_transition_time for c in pod.status.conditions if c.type == "Ready").timestamp()
        assert ready - started >= 600 * 0.85


def test_no_restart_policy_never_resumes_the_job(twin_factory):
    handle, core = _twin(twin_factory, "no-restart-policy")
    survivor, victim = job_pods(core)
    before = twin_now(handle)
    core.delete_namespaced_pod(victim.metadata.name, NS)
    # the survivor cannot rejoin a new rendezvous: it waits in NCCL until its watchdog kills it
    crashed = wait_for(lambda: [r for r in records(handle, "worker_crashed", SUBJECT, since=before)
                                if r["pod"] == survivor.metadata.name], "the survivor's NCCL watchdog")[0]
    fault = first(handle, "fault", SUBJECT, since=before)
    assert crashed["exit_code"] == 134 and crashed["at"] - fault["at"] == pytest.approx(600, abs=0.01)
    assert not records(handle, "job_resumed", SUBJECT, since=before)


def test_no_max_retry_fails_the_job_on_its_first_restart(twin_factory):
    handle, core = _twin(twin_factory, "no-max-retry")
    before = twin_now(handle)
    core.delete_namespaced_pod(job_pods(core)[0].metadata.name, NS)
    wait_for(lambda: (_vcjob(core).get("status") or {}).get("state", {}).get("phase") == "Failed", "the job to fail")
    assert _vcjob(core)["spec"]["maxRetry"] == 0
    assert not records(handle, "job_resumed", SUBJECT, since=before)


def test_no_pdb_lets_evictions_take_every_replica(twin_factory):
    handle, core = _twin(twin_factory, "no-pdb", scale=300, started=False)
    wait_for(lambda: first(handle, "all_ready", f"{NS}/{DEPLOY}"), "the inference replicas to be Ready")
    assert not client.PolicyV1Api(core.api_client).list_namespaced_pod_disruption_budget(NS).items
    pods = core.list_namespaced_pod(NS, label_selector=f"app={DEPLOY}").items
    for pod in pods:  # with a PDB (minAvailable 1) the second eviction would be refused with 429
        core.create_namespaced_pod_eviction(pod.metadata.name, NS, client.V1Eviction(
            metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=NS)))
    wait_for(lambda: first(handle, "gateway_outage_started", f"{NS}/{DEPLOY}"), "an outage of the gateway")


def test_no_tolerations_leave_training_pending(twin_factory):
    handle, core = _twin(twin_factory, "no-tolerations-for-gpu-taint", scale=300, started=False)
    pods = wait_for(lambda: len(p := job_pods(core, running=False)) == 2 and p, "the job's pods")
    env = dict(os.environ, KUBECONFIG=handle.kubeconfig)
    message = wait_for(lambda: next((e.message for e in core.list_namespaced_event(NS).items
                                     if e.reason == "FailedScheduling" and e.involved_object.name == pods[0].metadata.name),
                                    None), "a FailedScheduling event")
    assert "untolerated taint" in message
    assert all(p.status.phase == "Pending" for p in job_pods(core, running=False))
    shown = subprocess.run(["kubectl", "get", "pods", "-n", NS, "-l", f"volcano.sh/job-name={JOB}"], env=env,
                           capture_output=True, text=True, timeout=30)
    assert "Pending" in shown.stdout
    assert not first(handle, "job_started", SUBJECT)


def test_every_defect_has_an_end_to_end_test():
    text = "\n".join(p.read_text() for p in E2E.glob("test_*.py"))
    table = yaml.safe_load((E2E.parents[1] / "bench" / "verdicts.yaml").read_text())
    rows = {r["defect"] for r in table["defects"] if r["drill"] == "training"}  # test_training_integrity.py runs them
    untested = [name for name, _ in list_defects()
                if f'"{name}"' not in text and f"'{name}'" not in text and name not in rows]
    assert not untested, f"defects without an e2e test naming them: {untested}"


def test_burst_resubmitted_puts_a_deleted_unfinished_volcano_job_back(twin_factory):
    """The batch resubmitter (issue 30, class 2 on the noisy neighbour): a Volcano Job deleted before it finished is
    submitted again — same name, labels and spec — `resubmit_after` (15 s) of twin time later, with an Event."""
    handle, core = _twin(twin_factory, "burst-resubmitted", scale=300, started=False)
    jobs = client.CustomObjectsApi(core.api_client)
    labels = {"gpu-drills.io/burst": "test"}
    body = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "nightly-1", "labels": labels},
            "spec": {"minAvailable": 1, "schedulerName": "volcano", "queue": "training", "tasks": [{
                "name": "worker", "replicas": 1, "template": {"metadata": {"labels": labels}, "spec": {
                    "restartPolicy": "Never", "containers": [{"name": "trainer", "image": "busybox"}]}}}]}}
    made = jobs.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", NS, "jobs", body)
    jobs.delete_namespaced_custom_object("batch.volcano.sh", "v1alpha1", NS, "jobs", "nightly-1")

    def back():
        found = jobs.list_namespaced_custom_object("batch.volcano.sh", "v1alpha1", NS, "jobs",
                                                   label_selector="gpu-drills.io/burst=test")["items"]
        return found and found[0]["metadata"]["uid"] != made["metadata"]["uid"] and found[0]

    again = wait_for(back, "the deleted job to be submitted again")
    assert again["metadata"]["name"] == "nightly-1" and again["spec"]["queue"] == "training"
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=nightly-1").items
    assert any(e.reason == "Resubmitted" and "batch-resubmitter" in e.message for e in events), events


def test_time_sliced_serving_answers_with_nothing_while_a_gpu_pod_shares_the_node(twin_factory):
    """time-sliced-serving (issue 30, class 5 on the noisy neighbour): the inference nodes advertise 16 GPUs; a pod
    of another workload Running on a serving node makes that node's replica answer HTTP 200, `finish_reason: abort`,
    no text; the other replica keeps serving."""
    import requests

    handle, core = _twin(twin_factory, "time-sliced-serving", scale=600, started=False)
    assert core.read_node("gpu-infer-01").status.capacity["nvidia.com/gpu"] == "16"
    gateway = handle.info["gateway"]

    def answers() -> dict[str, dict]:
        seen = {}
        for _ in range(6):
            r = requests.post(gateway + "/v1/completions", json={"prompt": "hi", "max_tokens": 4}, timeout=10)
            if r.status_code == 200:
                seen[r.headers["x-twin-replica"]] = r.json()["choices"][0]
        return seen

    before = wait_for(lambda: len(answers()) == 2 and answers(), "both replicas answering")
    assert all(c["text"] for c in before.values())
    pod = {"metadata": {"name": "neighbour", "labels": {"app": "nightly"}}, "spec": {
        "nodeName": "gpu-infer-01", "restartPolicy": "Never",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "trainer", "image": "busybox",
                        "resources": {"limits": {"nvidia.com/gpu": "4"}, "requests": {"nvidia.com/gpu": "4"}}}]}}
    core.create_namespaced_pod(NS, pod)
    beside = {p.metadata.name for p in core.list_namespaced_pod(NS, label_selector="app=llama-7b-infer").items
              if p.spec.node_name == "gpu-infer-01"}
    during = wait_for(lambda: (a := answers()) and any(a.get(r, {}).get("finish_reason") == "abort" for r in beside)
                      and a, "the replica beside the pod to answer with nothing")
    for replica, choice in during.items():
        assert (choice["text"] == "" and choice["finish_reason"] == "abort") == (replica in beside), during
