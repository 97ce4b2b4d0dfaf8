"""Graceful termination through the real kubectl: Terminating pods, grace periods in twin time, force
deletion, finalizers, endpoints, and namespaces that terminate before they go."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from drills.core.clock import parse_iso
from drills.twin.launcher import start_twin
from tests.e2e.test_twin_kubectl import Kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH"),
]

NS = "grace"


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory) -> Kubectl:
    handle = start_twin(tmp_path_factory.mktemp("twin-grace"), profile="minimal")
    try:
        k = Kubectl(handle, tmp_path_factory.mktemp("kube-cache"))
        k.url = handle.url  # type: ignore[attr-defined]
        k.apply(_namespace(NS))
        yield k
    finally:
        handle.stop()


def _pod(name: str, *, grace: int = 30, stop_s: float | None = None, ns: str = NS, labels: str = "app: grace") -> str:
    ann = f"  annotations: {{twin.gpu-drills.io/stop-s: \"{stop_s}\"}}\n" if stop_s is not None else ""
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{{labels}}}\n{ann}"
            f"spec:\n  nodeName: gpu-infer-01\n  terminationGracePeriodSeconds: {grace}\n"
            f"  containers:\n  - name: main\n    image: vllm/vllm-openai:v0.6.3\n")


def _namespace(name: str) -> str:
    return f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"


def _until(predicate, what: str, deadline_s: float = 30.0):
    deadline = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _pod_json(kubectl: Kubectl, name: str, ns: str = NS) -> dict | None:
    proc = kubectl.run("-n", ns, "get", "pod", name, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def _ready(kubectl: Kubectl, name: str) -> bool:
    pod = _pod_json(kubectl, name) or {}
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def _twin_now(kubectl: Kubectl) -> float:
    import requests

    return requests.get(f"{kubectl.url}/twin/v1/clock", timeout=5).json()["now"]


def test_a_pod_that_ignores_sigterm_terminates_for_its_whole_grace_period(kubectl):
    kubectl.apply(_pod("stubborn", grace=120, stop_s=10_000))
    _until(lambda: _ready(kubectl, "stubborn"), "the pod to be Ready")
    assert 'pod "stubborn" deleted' in kubectl("-n", NS, "delete", "pod", "stubborn", "--wait=false")
    pod = _pod_json(kubectl, "stubborn")
    meta = pod["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 120
    marked = parse_iso(meta["deletionTimestamp"]).timestamp()
    assert "Terminating" in kubectl("-n", NS, "get", "pod", "stubborn")
    # out of Ready at once (so out of every Service's endpoints), while still there
    _until(lambda: not _ready(kubectl, "stubborn"), "the pod to leave Ready")
    assert _pod_json(kubectl, "stubborn") is not None
    _until(lambda: _pod_json(kubectl, "stubborn") is None, "the grace period to end", deadline_s=20)
    # SIGKILL at the end of the grace period, not before: 120 twin seconds after the DELETE
    assert _twin_now(kubectl) >= marked - 1
    reasons = kubectl("-n", NS, "get", "events", "--field-selector", "involvedObject.name=stubborn",
                      "-o", "jsonpath={.items[*].reason}").split()
    assert "Killing" in reasons


def test_a_pod_that_stops_on_sigterm_goes_before_its_grace_period_ends(kubectl):
    kubectl.apply(_pod("prompt", grace=3600, stop_s=5))
    _until(lambda: _ready(kubectl, "prompt"), "the pod to be Ready")
    started = _twin_now(kubectl)
    kubectl("-n", NS, "delete", "pod", "prompt", "--timeout=30s")  # kubectl waits for it to go
    assert _pod_json(kubectl, "prompt") is None
    assert 4 <= _twin_now(kubectl) - started < 600


def test_a_deleted_pods_containers_show_their_final_state_before_it_goes(kubectl):
    from kubernetes import client, config, watch

    kubectl.apply(_pod("final", grace=30, stop_s=5))
    _until(lambda: _ready(kubectl, "final"), "the pod to be Ready")
    since = _pod_json(kubectl, "final")["metadata"]["resourceVersion"]
    kubectl("-n", NS, "delete", "pod", "final", "--wait=false")
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubectl.env["KUBECONFIG"], client_configuration=cfg)
    with client.ApiClient(cfg) as api:
        events = []
        for event in watch.Watch().stream(client.CoreV1Api(api).list_namespaced_pod, NS, resource_version=since,
                                          field_selector="metadata.name=final", timeout_seconds=30):
            events.append(event)
            if event["type"] == "DELETED":
                break
    assert [e["type"] for e in events][-1] == "DELETED", [e["type"] for e in events]
    last_modified = events[-2]
    assert last_modified["type"] == "MODIFIED"
    state = last_modified["object"].status.container_statuses[0].state
    assert state.running is None and state.terminated is not None
    # it stopped on SIGTERM (5 s, within its 30 s grace period): exit 0
    assert (state.terminated.exit_code, state.terminated.reason) == (0, "Completed")
    assert state.terminated.finished_at >= state.terminated.started_at
    assert last_modified["object"].metadata.deletion_timestamp is not None


def test_force_deletion_removes_at_once(kubectl):
    kubectl.apply(_pod("forced", grace=600, stop_s=10_000))
    _until(lambda: _ready(kubectl, "forced"), "the pod to be Ready")
    out = kubectl.run("-n", NS, "delete", "pod", "forced", "--force", "--grace-period=0")
    assert 'pod "forced" force deleted' in out.stdout
    assert "Immediate deletion does not wait for confirmation" in out.stderr
    assert _pod_json(kubectl, "forced") is None


def test_a_shorter_second_delete_shortens_the_grace_period(kubectl):
    kubectl.apply(_pod("shortened", grace=3600, stop_s=10_000))
    _until(lambda: _ready(kubectl, "shortened"), "the pod to be Ready")
    kubectl("-n", NS, "delete", "pod", "shortened", "--wait=false")
    assert _pod_json(kubectl, "shortened")["metadata"]["deletionGracePeriodSeconds"] == 3600
    kubectl("-n", NS, "delete", "pod", "shortened", "--grace-period=5", "--timeout=30s")
    assert _pod_json(kubectl, "shortened") is None


def test_finalizers_hold_a_terminated_pod(kubectl):
    manifest = _pod("held", grace=5, stop_s=1).replace("  labels:", "  finalizers: [drills/hold]\n  labels:")
    kubectl.apply(manifest)
    _until(lambda: _ready(kubectl, "held"), "the pod to be Ready")
    kubectl("-n", NS, "delete", "pod", "held", "--wait=false")
    time.sleep(0.5)  # 30 twin seconds: far past its stop time and grace period
    assert _pod_json(kubectl, "held")["metadata"]["deletionTimestamp"]
    kubectl("-n", NS, "patch", "pod", "held", "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    _until(lambda: _pod_json(kubectl, "held") is None, "the pod to go once its finalizer is removed")


def test_a_deleted_inference_pod_leaves_the_endpoints_at_once(kubectl):
    ns = "ai-platform"
    ips = lambda: {a["targetRef"]["name"] for s in json.loads(kubectl("-n", ns, "get", "endpoints",  # noqa: E731
                   "llama-7b-infer", "-o", "json")).get("subsets") or [] for a in s.get("addresses") or []}
    serving = _until(lambda: ips() if len(ips()) == 2 else None, "both replicas to be in the endpoints", 60)
    victim = sorted(serving)[0]
    kubectl("-n", ns, "annotate", "pod", victim, "twin.gpu-drills.io/stop-s=10000")
    # An hour's grace (a minute of wall time at 60×): the pod is still terminating when we look, however busy
    # the machine; the endpoints must not wait for any of it.
    kubectl("-n", ns, "delete", "pod", victim, "--wait=false", "--grace-period=3600")
    _until(lambda: victim not in ips(), "the endpoints to drop the terminating pod", 5)
    assert _pod_json(kubectl, victim, ns)["metadata"]["deletionTimestamp"]  # still there, terminating


def test_a_deleted_namespace_terminates_until_it_is_empty(kubectl):
    kubectl.apply(_namespace("doomed"))
    kubectl.apply(_pod("last", grace=60, stop_s=10_000, ns="doomed"))
    _until(lambda: _ready(kubectl, "last") or _pod_json(kubectl, "last", "doomed"), "the pod to exist")
    kubectl("delete", "namespace", "doomed", "--wait=false")
    assert kubectl("get", "namespace", "doomed", "-o", "jsonpath={.status.phase}") == "Terminating"
    refused = kubectl.run("apply", "-f", "-", check=False,
                          input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late, namespace: doomed}\n")
    assert refused.returncode != 0
    assert "unable to create new content in namespace doomed because it is being terminated" in refused.stderr
    kubectl("wait", "--for=delete", "namespace/doomed", "--timeout=30s")
    assert kubectl.run("get", "namespace", "doomed", check=False).returncode != 0
