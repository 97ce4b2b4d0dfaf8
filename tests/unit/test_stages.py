"""The default pod stages, executed the way a kubelet controller will: at each point exactly one
stage matches, its rendered patch (applied with the server's own strategic merge) keeps the pod
parseable by the kubernetes client, and the chain ends Ready (or deleted)."""

from __future__ import annotations

import json
import random

import pytest
from kubernetes.client import ApiClient

from drills.twin.api.defaults import apply_defaults
from drills.twin.api.patch import STRATEGIC_MERGE_PATCH, apply_patch
from drills.twin.api.resources import by_kind
from drills.twin.controllers.nodeutil import container_statuses, stop_outcome
from drills.twin.profile import load_profile
from drills.twin.stages import Delay, evaluate, get_path, render_template

NOW = "2026-01-02T03:04:05Z"
POD_RT = by_kind("v1", "Pod")


@pytest.fixture(scope="module")
def profile():
    return load_profile("minimal")


def _pod(node: str | None = "gpu-infer-01") -> dict:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "llama-7b-infer-abc", "namespace": "ai-platform", "uid": "uid-1",
                        "creationTimestamp": NOW, "resourceVersion": "1", "labels": {"app": "llama-7b-infer"}},
           "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3"}]}}
    if node:
        pod["spec"]["nodeName"] = node
    return apply_defaults(POD_RT, pod, NOW)


def _step(profile, pod: dict, ctx: dict) -> tuple[str, dict | None]:
    matching = [s for s in profile.stages.values() if s.resource == "Pod" and s.matches(pod, ctx)]
    assert len(matching) == 1, f"stages matching: {[s.name for s in matching]}"
    stage = matching[0]
    delay = stage.delay.seconds(profile.timings, ctx, random.Random(1))
    out = stage.render(pod, {**ctx, "delay": delay})
    if out.delete:
        return stage.name, None
    for sub, ptype, body in out.patches:
        assert (sub, ptype) == ("status", "strategic")
        pod = apply_patch(pod, body, STRATEGIC_MERGE_PATCH, "Pod")
    ApiClient().deserialize(json.dumps(pod), "V1Pod", "application/json")
    return stage.name, pod


def _ctx(cached: bool) -> dict:
    return {"now": NOW, "host_ip": "10.0.0.6", "pod_ip": "10.128.0.9", "image_cached": cached, "readiness": 60.0}


@pytest.mark.parametrize("cached,pull", [(True, "pod-pull-cached"), (False, "pod-pull-cold")])
def test_pod_runs_through_pull_start_ready(profile, cached, pull):
    pod, names = _pod(), []
    while True:
        ready = get_path(pod, ".status.conditions[type=Ready].status")
        if ready == "True":
            break
        name, pod = _step(profile, pod, _ctx(cached))
        names.append(name)
        assert len(names) < 10
    assert names == ["pod-accept", pull, "pod-start", "pod-ready"]
    status = pod["status"]
    assert status["phase"] == "Running" and status["podIP"] == "10.128.0.9" and status["hostIP"] == "10.0.0.6"
    cs = status["containerStatuses"][0]
    assert cs["ready"] is True and cs["started"] is True and "running" in cs["state"]
    assert cs["imageID"].startswith("vllm/vllm-openai@sha256:")
    conds = {c["type"]: c["status"] for c in status["conditions"]}
    assert conds == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True"}
    assert not any(s.matches(pod, _ctx(cached)) for s in profile.stages.values())  # at rest


def test_pull_events_say_cached_or_pulled(profile):
    pod = _step(profile, _pod(), _ctx(False))[1]
    cold = profile.stages["pod-pull-cold"]
    assert cold.render_enter_events(pod, _ctx(False))[0]["message"] == 'Pulling image "vllm/vllm-openai:v0.6.3"'
    done = cold.render(pod, {**_ctx(False), "delay": 91.26})
    assert done.events[0]["message"] == 'Successfully pulled image "vllm/vllm-openai:v0.6.3" in 91.3s'
    cached = profile.stages["pod-pull-cached"].render(pod, _ctx(True))
    assert cached.events[0]["message"].endswith("already present on machine")


def test_deleted_pods_go(profile):
    pod = _pod()
    pod["metadata"]["deletionTimestamp"] = NOW
    ctx = {**_ctx(True), "termination": 2.0, "stop": stop_outcome(2.0, 30.0), "container_statuses": container_statuses(pod)}
    name, pod = _step(profile, pod, ctx)
    assert name == "pod-terminate"  # never started: its container still ends terminated
    assert pod["status"]["containerStatuses"][0]["state"] == {"terminated": {
        "exitCode": 0, "reason": "Completed", "finishedAt": NOW}}  # the nulls dropped by the merge
    assert _step(profile, pod, ctx) == ("pod-remove", None)
    unscheduled = _pod(node=None)
    unscheduled["metadata"]["deletionTimestamp"] = NOW
    assert _step(profile, unscheduled, _ctx(True)) == ("pod-delete-unscheduled", None)


def test_a_deleted_ready_pod_leaves_ready_at_once_then_stops_after_its_termination_time(profile):
    ctx, pod = _ctx(True), _pod()
    while get_path(pod, ".status.conditions[type=Ready].status") != "True":
        pod = _step(profile, pod, ctx)[1]
    pod["metadata"]["deletionTimestamp"] = NOW
    name, pod = _step(profile, pod, {**ctx, "termination": 30.0})
    assert name == "pod-terminating"
    assert get_path(pod, ".status.conditions[type=Ready].status") == "False"
    assert get_path(pod, ".status.conditions[type=Ready].reason") == "PodTerminating"
    stage = profile.stages["pod-terminate"]
    assert stage.matches(pod, ctx) and stage.delay.seconds(profile.timings, {"termination": 30.0}) == 30.0
    assert stage.render_enter_events(pod, ctx)[0] == {
        "type": "Normal", "reason": "Killing", "message": "Stopping container vllm", "source": "kubelet"}
    running = pod["status"]["containerStatuses"][0]
    name, pod = _step(profile, pod, {**ctx, "termination": 30.0, "stop": stop_outcome(45.0, 30.0),
                                     "container_statuses": container_statuses(pod)})
    assert name == "pod-terminate"  # SIGKILLed when the grace period ran out
    final = pod["status"]["containerStatuses"][0]
    assert final["state"] == {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": NOW,
                                             "startedAt": running["state"]["running"]["startedAt"],
                                             "containerID": running["containerID"]}}
    assert (final["ready"], final["started"], final["imageID"]) == (False, False, running["imageID"])
    assert _step(profile, pod, ctx) == ("pod-remove", None)
    unscheduled = _pod(node=None)
    unscheduled["metadata"]["deletionTimestamp"] = NOW
    assert _step(profile, unscheduled, _ctx(True)) == ("pod-delete-unscheduled", None)


def test_unbound_pods_wait_for_the_scheduler(profile):
    assert not any(s.matches(_pod(node=None), _ctx(True)) for s in profile.stages.values())


def test_delay_sources_and_jitter(profile):
    t = profile.timings
    assert Delay(duration_from="image_pull_cold", jitter=0).seconds(t) == 90
    assert Delay(duration_from="readiness", jitter=0).seconds(t, {"readiness": 60}) == 60
    jittered = [Delay(duration=100).seconds(t, rng=random.Random(i)) for i in range(50)]
    assert all(90 <= d <= 110 for d in jittered) and len(set(jittered)) > 1
    with pytest.raises(KeyError):
        Delay(duration_from="nope").seconds(t)


def test_paths_and_templates():
    obj = {"metadata": {"labels": {"app.kubernetes.io/name": "x"}, "uid": "u"},
           "status": {"conditions": [{"type": "Ready", "status": "False"}]}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    assert get_path(obj, '.metadata.labels["app.kubernetes.io/name"]') == "x"
    assert get_path(obj, ".status.conditions[type=Ready].status") == "False"
    assert get_path(obj, ".spec.containers[1].name") == "b" and get_path(obj, ".spec.containers[5].name") is None
    assert evaluate("obj.metadata.uid|hex", obj, {})[:8] == evaluate(".metadata.uid|hex", obj, {})[:8]
    rendered = render_template({"n": "${n}", "s": "x-${n}", "l": {"$forEach": ".spec.containers", "as": "c",
                                                                 "item": {"name": "${c.name}"}}}, obj, {"n": 3})
    assert rendered == {"n": 3, "s": "x-3", "l": [{"name": "a"}, {"name": "b"}]}
    with pytest.raises(KeyError):
        render_template("${missing}", obj, {})
