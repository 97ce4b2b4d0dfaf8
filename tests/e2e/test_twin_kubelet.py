"""The twin's kubelets: image pulls (cached vs cold, measured in twin time from events and conditions),
readiness after the startup annotation, container exits and restarts by restartPolicy, deletion."""

from __future__ import annotations

import requests

from twin_core_helpers import NS, TRAINER, condition, core_of, events, fault, first_event, gpu_pod, ts, wait_for

COLD = "registry.local/ai-platform/llm-trainer:9.9.9-rc1"  # on no node


def _ready(core, name: str):
    pod = core.read_namespaced_pod(name, NS)
    cond = condition(pod, "Ready")
    return pod if cond is not None and cond.status == "True" else None


def _startup_s(core, name: str) -> float:
    """Twin seconds from the pod's binding to Ready (condition timestamps, second precision)."""
    pod = wait_for(lambda: _ready(core, name), f"{name} Ready")
    return ts(condition(pod, "Ready").last_transition_time) - ts(condition(pod, "PodScheduled").last_transition_time)


def test_cold_pull_takes_longer_than_a_cached_one(twin_factory):
    handle = twin_factory(scale=600)
    core = core_of(handle)
    core.create_namespaced_pod(NS, gpu_pod("cached", gpus=1, node="gpu-train-03"))
    core.create_namespaced_pod(NS, gpu_pod("cold", gpus=1, node="gpu-train-04", image=COLD))
    cached_s, cold_s = _startup_s(core, "cached"), _startup_s(core, "cold")
    # profile: 0.5 s vs 90 s ± 10 % pulls. At 600x a few ms of controller latency on a busy machine are
    # many seconds of twin time, so compare the two pods with each other, not with a wall-clock-ish bound.
    assert cold_s >= 75 and cold_s - cached_s >= 40, (cached_s, cold_s)
    assert first_event(core, "cached", "Pulled").message == f'Container image "{TRAINER}" already present on machine'
    assert not events(core, "cached", "Pulling")
    pulling, pulled = first_event(core, "cold", "Pulling"), first_event(core, "cold", "Pulled")
    assert pulling.message == f'Pulling image "{COLD}"'
    assert pulled.message.startswith(f'Successfully pulled image "{COLD}" in ')
    assert ts(pulled.first_timestamp) - ts(pulling.first_timestamp) >= 75
    assert [e.reason for e in sorted(events(core, "cold"), key=lambda e: (ts(e.first_timestamp), e.reason != "Scheduled"))] \
        [:3] == ["Scheduled", "Pulling", "Pulled"]


def test_a_pulled_image_stays_cached_on_its_node(twin_factory):
    handle = twin_factory(scale=600)
    core = core_of(handle)
    core.create_namespaced_pod(NS, gpu_pod("first", gpus=1, node="gpu-train-03", image=COLD))
    wait_for(lambda: _ready(core, "first"), "first Ready")
    # the kubelet reports a pulled image in the node's status on its next status write, not with the pod
    wait_for(lambda: COLD in [n for img in core.read_node("gpu-train-03").status.images or [] for n in img.names],
             f"{COLD} in the node's images")
    core.create_namespaced_pod(NS, gpu_pod("second", gpus=1, node="gpu-train-03", image=COLD))
    wait_for(lambda: _ready(core, "second"), "second Ready")
    # the kubelet did not pull: no Pulling event, the image "already present" (the time it took is no proof at
    # 600×, where a busy machine stretches any start past a cold pull's 81-99 s)
    assert first_event(core, "second", "Pulled").message == f'Container image "{COLD}" already present on machine'
    assert first_event(core, "second", "Pulling") is None


def test_cold_image_cache_defect_makes_every_pull_slow(twin_factory):
    handle = twin_factory(defects=["cold-image-cache"], scale=1200)
    core = core_of(handle)
    core.create_namespaced_pod(NS, gpu_pod("was-cached", gpus=1, node="gpu-train-03"))
    assert _startup_s(core, "was-cached") >= 200  # 4 min ± 10 %
    assert first_event(core, "was-cached", "Pulling").message == f'Pulling image "{TRAINER}"'


def test_startup_annotation_delays_readiness(twin_factory):
    handle = twin_factory(scale=60)  # 1 s of a starved CPU is 60 twin seconds late here, 600 at 600×
    core = core_of(handle)
    pod = gpu_pod("model", gpus=1, node="gpu-train-03", annotations={"twin.gpu-drills.io/startup-s": "120"})
    # the model load delays Ready only through a readiness probe: without one the kubelet reports Ready at
    # container start, whatever the process does (kube: "the default state is Success")
    pod["spec"]["containers"][0]["readinessProbe"] = {"httpGet": {"path": "/health", "port": 8000}}
    core.create_namespaced_pod(NS, pod)
    pod = wait_for(lambda: _ready(core, "model"), "model Ready")
    started = ts(pod.status.container_statuses[0].state.running.started_at)
    loading = ts(condition(pod, "Ready").last_transition_time) - started
    assert 100 <= loading <= 240, loading  # never early; late only by the host's scheduling lag


def test_container_exit_fails_a_never_restart_pod(twin_factory):
    handle = twin_factory(scale=600)
    core = core_of(handle)
    core.create_namespaced_pod(NS, gpu_pod("worker", gpus=1, node="gpu-train-03", restart_policy="Never"))
    wait_for(lambda: _ready(core, "worker"), "worker Ready")
    fault(handle, f"namespaces/{NS}/pods/worker/exit",
          {"code": 1, "reason": "Error", "message": "NCCL error: unhandled cuda error"})
    pod = wait_for(lambda: (p := core.read_namespaced_pod("worker", NS)).status.phase == "Failed" and p, "Failed")
    state = pod.status.container_statuses[0].state.terminated
    assert (state.exit_code, state.reason, state.message) == (1, "Error", "NCCL error: unhandled cuda error")
    assert condition(pod, "Ready").status == "False"
    assert "twin.gpu-drills.io/exit" not in (pod.metadata.annotations or {})


def test_container_exit_restarts_an_always_pod(twin_factory):
    handle = twin_factory(scale=600)
    core = core_of(handle)
    core.create_namespaced_pod(NS, gpu_pod("server", gpus=1, node="gpu-train-03"))
    wait_for(lambda: _ready(core, "server"), "server Ready")
    requests.post(f"{handle.url}/twin/v1/namespaces/{NS}/pods/server/log", data="serving\n", timeout=5)
    fault(handle, f"namespaces/{NS}/pods/server/exit", {"code": 137, "reason": "OOMKilled"})
    pod = wait_for(lambda: (p := _ready(core, "server")) and p.status.container_statuses[0].restart_count == 1 and p,
                   "server restarted and Ready")
    status = pod.status.container_statuses[0]
    assert (status.last_state.terminated.exit_code, status.last_state.terminated.reason) == (137, "OOMKilled")
    assert pod.status.phase == "Running"
    assert core.read_namespaced_pod_log("server", NS, previous=True) == "serving\n"
    fault(handle, f"namespaces/{NS}/pods/server/exit", {"code": 1})  # a second crash backs off
    backoff = wait_for(lambda: first_event(core, "server", "BackOff"), "the BackOff event")
    assert backoff.type == "Warning" and backoff.message.startswith("Back-off restarting failed container main")
    wait_for(lambda: (p := _ready(core, "server")) and p.status.container_statuses[0].restart_count == 2,
             "the second restart")


def test_deleting_a_pod_stops_its_container(twin_factory):
    handle = twin_factory(scale=600)
    core = core_of(handle)
    core.create_namespaced_pod(NS, gpu_pod("short", gpus=1, node="gpu-train-03"))
    wait_for(lambda: _ready(core, "short"), "short Ready")
    core.delete_namespaced_pod("short", NS)
    wait_for(lambda: "short" not in [p.metadata.name for p in core.list_namespaced_pod(NS).items], "the pod to go")
    killing = wait_for(lambda: first_event(core, "short", "Killing"), "the Killing event")
    assert killing.message == "Stopping container main" and killing.source.host == "gpu-train-03"
