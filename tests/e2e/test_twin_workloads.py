"""The twin's training workload as a drill sees it: NCCL init and step lines in twin time, checkpoints,
a drained node restarting the Volcano job elsewhere from the latest checkpoint, a GPU XID crash."""

from __future__ import annotations

import os
import subprocess

import pytest
import requests
from kubernetes import client

from fixtures.twin import api_client_for
from twin_truth_helpers import JOB, NS, first, job_pods, logs, records, twin_now, wait_for

SUBJECT = f"{NS}/{JOB}"
pytestmark = pytest.mark.training


@pytest.fixture
def training(twin_factory):
    handle = twin_factory(scale=600)
    api = api_client_for(handle)
    core = client.CoreV1Api(api)
    wait_for(lambda: first(handle, "job_started", SUBJECT), "the training job to start")
    yield handle, core
    api.close()


def test_logs_read_like_an_nccl_job_in_twin_time(training):
    handle, core = training
    pods = job_pods(core)
    assert [p.metadata.name for p in pods] == [f"{JOB}-worker-0", f"{JOB}-worker-1"]
    text, events = wait_for(lambda: (got := logs(core, pods[0].metadata.name)) and
                            sum(e.kind == "step" for e in got[1]) >= 3 and got, "three step lines")
    transport = next(e for e in events if e.kind == "nccl_transport")
    assert transport.transport == "RoCE" and transport.devices[0] == "mlx5_0:1/RoCE" and transport.is_rdma
    saved = [e for e in events if e.kind == "checkpoint_saved"]  # Megatron-LM: the save line, then its timer
    steps = sorted({e.step for e in saved if e.step is not None})
    # a job under way: its log shows the saves before the pod started, every 1,500 steps (the interval), and any
    # made since (a test slowed by a busy machine reads the log later: 7,500 may be there too)
    assert {4500, 6000} <= set(steps) and all(b - a == 1500 for a, b in zip(steps, steps[1:])), steps
    assert any(e.step == 6000 and e.path == f"/ckpt/{JOB}" for e in saved) and max(e.duration_s or 0 for e in saved) > 0
    steps = [e for e in events if e.kind == "step"]
    assert steps[0].step == 6150 and all(b.step > a.step for a, b in zip(steps, steps[1:]))
    assert all(abs(e.samples_per_s - 256) < 5 and e.step_time_s == pytest.approx(0.25, abs=0.01) for e in steps)
    # stamps are twin time: the newest line is near the twin's clock, not the wall clock
    now = twin_now(handle)
    assert now - 600 < steps[-1].at.timestamp() <= now + 1
    assert all(b.at >= a.at for a, b in zip(events, events[1:]))
    state = requests.get(handle.info["truth"], timeout=5).json()["training"][SUBJECT]
    assert state["transport"] == "IB" and state["baseline_samples_per_s"] == 256 and state["running"]
    store = os.path.join(handle.info["checkpoint_store"], NS, JOB)
    held = os.listdir(store)  # Megatron's layout: iteration dirs and the tracker naming the newest complete one
    assert "iter_0006000" in held and "latest_checkpointed_iteration.txt" in held, held


def test_drained_node_restarts_job_from_latest_checkpoint(training):
    handle, core = training
    saved = wait_for(lambda: [r for r in records(handle, "checkpoint_saved", SUBJECT) if r["step"] == 7500],
                     "the checkpoint at step 7500")[0]
    assert saved["duration_s"] == pytest.approx(96 / 2.5, rel=0.1)  # size / store bandwidth
    victim = job_pods(core)[0]
    node = victim.spec.node_name
    before = twin_now(handle)
    env = dict(os.environ, KUBECONFIG=handle.kubeconfig)
    done = subprocess.run(["kubectl", "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
                           "--timeout=60s"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    fault = wait_for(lambda: first(handle, "fault", SUBJECT, since=before), "the job to notice the lost worker")
    latest = fault["latest_checkpoint"]
    assert latest >= 7500 and fault["step_at_fault"] > latest
    resumed = wait_for(lambda: first(handle, "first_step_after_resume", SUBJECT, since=before), "the first step")
    assert resumed["step"] == latest + 1
    pods = job_pods(core)
    assert len(pods) == 2 and node not in {p.spec.node_name for p in pods}
    _, events = wait_for(lambda: (got := logs(core, pods[0].metadata.name)) and
                         any(e.kind == "step" for e in got[1]) and got, "step lines from the new worker")
    resume = next(e for e in events if e.kind == "resumed")
    assert resume.step == latest and resume.path == f"/ckpt/{JOB}"  # Megatron-LM names its --load directory
    first_step = next(e for e in events if e.kind == "step")
    assert first_step.step == latest + 1
    assert first_step.at.timestamp() == pytest.approx(resumed["at"], abs=0.01)  # the line is the truth
    caught = wait_for(lambda: first(handle, "caught_up", SUBJECT, since=before), "the job to catch up")
    assert caught["step"] >= fault["step_at_fault"] and caught["at"] > resumed["at"]
    job = client.CustomObjectsApi(core.api_client).get_namespaced_custom_object("batch.volcano.sh", "v1alpha1", NS,
                                                                                 "jobs", JOB)
    assert job["status"]["retryCount"] >= 1


def test_gpu_xid_crashes_its_worker_and_the_job_restarts(training):
    handle, core = training
    victim = job_pods(core)[1]
    node = victim.spec.node_name
    before = twin_now(handle)
    answer = requests.post(f"{handle.url}/twin/v1/nodes/{node}/gpu", json={"state": "unhealthy", "xid": 79}, timeout=5)
    assert answer.status_code == 200
    crashed = wait_for(lambda: first(handle, "worker_crashed", SUBJECT, since=before), "the worker to crash")
    assert crashed["pod"] == victim.metadata.name and crashed["exit_code"] == 1 and crashed["cause"] == "gpu_xid"
    wait_for(lambda: first(handle, "first_step_after_resume", SUBJECT, since=before), "the job to resume")
    assert node not in {p.spec.node_name for p in job_pods(core)}  # the unhealthy-GPU taint keeps it away
