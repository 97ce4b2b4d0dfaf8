"""Switch uplinks drive NCCL: an uplink shut over SSH (paramiko, strict host keys) reroutes the job's
traffic with reduced then restored throughput; without PFC NCCL falls back to NET/Socket; with a
single uplink the leaf is isolated, NCCL times out and Volcano restarts the job."""

from __future__ import annotations

import pytest
from kubernetes import client

from fixtures.twin import api_client_for
from twin_truth_helpers import (
    JOB, NS, first, job_pods, leaf_of, logs, records, ssh_run, twin_now, uplink_command, wait_for,
)

SUBJECT = f"{NS}/{JOB}"
pytestmark = pytest.mark.network


def _start(twin_factory, defects=(), scale=300):
    handle = twin_factory(defects=defects, scale=scale)
    core = client.CoreV1Api(api_client_for(handle))
    wait_for(lambda: first(handle, "job_started", SUBJECT), "the training job to start")
    pod = job_pods(core)[0]
    leaf = leaf_of(core, pod.spec.node_name)
    switch = next(s for s in handle.info["switches"] if s["name"] == leaf)
    return handle, core, pod.metadata.name, switch


def _shut(handle, switch: dict, up: bool = False) -> None:
    code, text = ssh_run(handle, switch["name"], uplink_command(switch["dialect"], switch["uplinks"][0], up))
    assert code == 0, text


def test_uplink_drop_reroutes_and_throughput_recovers(twin_factory):
    handle, core, pod, switch = _start(twin_factory)
    before = twin_now(handle)
    _shut(handle, switch)
    restored = wait_for(lambda: first(handle, "throughput_restored", SUBJECT, since=before), "throughput restored")
    fault = first(handle, "fabric_fault", SUBJECT, since=before)
    rerouted = first(handle, "rerouted", SUBJECT, since=before)
    assert fault["leaf"] == switch["name"] and fault["uplinks_up"] == fault["uplinks"] - 1
    assert fault["at"] < rerouted["at"] < restored["at"] and restored["path"] == "rerouted"
    assert rerouted["at"] - fault["at"] == pytest.approx(15, abs=0.01)  # the profile's convergence delay
    text, events = wait_for(lambda: (got := logs(core, pod)) and any(
        e.kind == "step" and e.at.timestamp() > restored["at"] for e in got[1]) and got, "a step after the restore")
    warns = [e for e in events if e.kind == "nccl_warn"]
    assert warns and not any(e.is_timeout for e in warns)
    assert "Got async event : port error" in text and "Got async event : port active" in text  # NCCL's IB async events
    assert "NET/Socket" not in text and "rerouted" not in text  # NCCL does not log a reroute
    steps = [e for e in events if e.kind == "step"]
    during = [e for e in steps if rerouted["at"] < e.at.timestamp() < restored["at"]]
    after = [e for e in steps if e.at.timestamp() > restored["at"]]
    assert during and all(e.samples_per_s < 0.7 * 256 for e in during)
    assert after and all(e.samples_per_s >= 0.9 * 256 for e in after)
    assert not records(handle, "nccl_timeout", SUBJECT)
    _shut(handle, switch, up=True)


def test_roce_without_pfc_falls_back_to_sockets(twin_factory):
    handle, core, pod, switch = _start(twin_factory, defects=["roce-no-pfc"])
    before = twin_now(handle)
    _shut(handle, switch)
    fallback = wait_for(lambda: [r for r in records(handle, "nccl_transport", SUBJECT, since=before)
                                 if r["transport"] == "Socket"], "the socket fallback")[0]
    _, events = wait_for(lambda: (got := logs(core, pod)) and any(
        e.kind == "step" and e.at.timestamp() > fallback["at"] + 300 for e in got[1]) and got, "steps on sockets")
    transports = [e.transport for e in events if e.kind == "nccl_transport"]
    assert transports[0] == "RoCE" and transports[-1] == "Socket"
    assert len(fallback["ranks"]) == 1  # only the ranks behind the lossy leaf lose RDMA
    late = [e for e in events if e.kind == "step" and e.at.timestamp() > fallback["at"] + 300]
    assert all(e.samples_per_s < 0.5 * 256 for e in late)  # ~20 % of the RDMA bandwidth: never restored
    assert not first(handle, "throughput_restored", SUBJECT, since=before)


def test_single_uplink_isolates_the_leaf_and_nccl_times_out(twin_factory):
    handle, core, pod, switch = _start(twin_factory, defects=["single-uplink"], scale=600)
    assert len(switch["uplinks"]) == 1
    old = {p.metadata.uid for p in job_pods(core)}
    before = twin_now(handle)
    _shut(handle, switch)
    timeout = wait_for(lambda: first(handle, "nccl_timeout", SUBJECT, since=before), "the NCCL timeout")
    _shut(handle, switch, up=True)  # the operator restores the link so the restarted job can run
    fault = first(handle, "fabric_fault", SUBJECT, since=before)
    assert fault["uplinks_up"] == 0 and timeout["at"] - fault["at"] == pytest.approx(600, abs=0.01)  # nccl.timeout
    crashed = [r for r in records(handle, "worker_crashed", SUBJECT, since=before) if r["at"] == timeout["at"]]
    assert {r["exit_code"] for r in crashed} == {134} and len(crashed) == 2  # every rank's watchdog fired
    resumed = wait_for(lambda: first(handle, "first_step_after_resume", SUBJECT, since=timeout["at"]),
                       "the restarted job to step")
    assert resumed["step"] == first(handle, "fault", SUBJECT, since=before)["latest_checkpoint"] + 1
    assert not old & {p.metadata.uid for p in job_pods(core)}  # Volcano replaced every worker
