"""ReplicationControllers (core/v1) on the twin through the official python client: defaulted selector and
labels, pods kept at `spec.replicas`, the scale subresource, and the garbage collector taking the pods
of a controller deleted with background propagation. And what the python client's create_from_yaml
compares byte for byte: the Status body of a conflict, here an APIService's."""

from __future__ import annotations

import shutil

import pytest
from kubernetes import client, utils

from drills.twin.launcher import start_twin
from fixtures.twin import api_client_for
from tests.e2e.test_twin_kubectl import Kubectl
from tests.e2e.twin_core_helpers import GPU_TOLERATION, wait_for

NS = "default"


@pytest.fixture(scope="module")
def handle(tmp_path_factory):
    twin = start_twin(tmp_path_factory.mktemp("twin-rc"), profile="minimal")
    try:
        yield twin
    finally:
        twin.stop()


@pytest.fixture(scope="module")
def api(handle):
    api = api_client_for(handle)
    yield api
    api.close()


def _pods(core: client.CoreV1Api, app: str) -> list:
    return [p for p in core.list_namespaced_pod(NS, label_selector=f"app={app}").items
            if p.metadata.deletion_timestamp is None]


def test_a_replication_controller_keeps_its_pods_scales_and_takes_them_along(api):
    core = client.CoreV1Api(api)
    rc = core.create_namespaced_replication_controller(NS, {
        "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "tolerations": [GPU_TOLERATION], "containers": [{"name": "nginx", "image": "nginx"}]}}}})
    assert rc.spec.selector == {"app": "web"} and rc.metadata.labels == {"app": "web"}
    pods = wait_for(lambda: len(_pods(core, "web")) == 2 and _pods(core, "web"), "two pods")
    owner = pods[0].metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("ReplicationController", "web", True)
    wait_for(lambda: core.read_namespaced_replication_controller("web", NS).status.ready_replicas == 2,
             "both replicas ready", deadline_s=60)
    scale = core.patch_namespaced_replication_controller_scale("web", NS, {"spec": {"replicas": 1}})
    assert scale.spec.replicas == 1 and scale.status.selector == "app=web"
    wait_for(lambda: len(_pods(core, "web")) == 1, "one pod after scaling down", deadline_s=60)
    core.delete_namespaced_replication_controller("web", NS, propagation_policy="Background")
    wait_for(lambda: not core.list_namespaced_pod(NS, label_selector="app=web").items,
             "the garbage collector deleting the pods", deadline_s=60)


def test_a_conflict_is_the_real_servers_status_bytes(api):
    service = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": "v1alpha1.wardle.k8s.io"},
               "spec": {"insecureSkipTLSVerify": True, "group": "wardle.k8s.io", "groupPriorityMinimum": 1000,
                        "versionPriority": 15, "service": {"name": "api", "namespace": "wardle"},
                        "version": "v1alpha1"}}
    utils.create_from_dict(api, service)
    assert client.ApiregistrationV1Api(api).read_api_service("v1alpha1.wardle.k8s.io").spec.group == "wardle.k8s.io"
    with pytest.raises(utils.FailToCreateError) as again:
        utils.create_from_dict(api, service)
    assert str(again.value) == (
        'Error from server (Conflict): {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        '"message":"apiservices.apiregistration.k8s.io \\"v1alpha1.wardle.k8s.io\\" already exists",'
        '"reason":"AlreadyExists","details":{"name":"v1alpha1.wardle.k8s.io","group":"apiregistration.k8s.io",'
        '"kind":"apiservices"},"code":409}\n')


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_scales_and_prints_a_replication_controller(handle, tmp_path):
    kubectl = Kubectl(handle, tmp_path / "kube-cache")
    kubectl.apply("apiVersion: v1\nkind: ReplicationController\nmetadata: {name: api}\nspec:\n  replicas: 1\n"
                  "  template:\n    metadata: {labels: {app: api, tier: fe}}\n    spec:\n"
                  "      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
                  "      containers: [{name: nginx, image: nginx}]\n")
    assert kubectl("scale", "rc/api", "--replicas=2").strip() == "replicationcontroller/api scaled"
    kubectl("wait", "--for=jsonpath={.status.readyReplicas}=2", "rc/api", "--timeout=60s", timeout=90)
    header, row = kubectl("get", "rc", "api", "-o", "wide").splitlines()
    assert header.split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert row.split()[:4] == ["api", "2", "2", "2"] and row.split()[-3:] == ["nginx", "nginx", "app=api,tier=fe"]
