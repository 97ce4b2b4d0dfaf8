"""The twin's API server as the official kubernetes Python client sees it."""

from __future__ import annotations

import functools
import json

import pytest
import requests
from kubernetes import client, watch

from fixtures.twin import UNSCHEDULED, api_client_for, make_node, ready_status
from fixtures.twin import make_pod as _make_pod

# pods here stay exactly as the tests make them: the twin's scheduler and kubelet leave them alone
make_pod = functools.partial(_make_pod, scheduler_name=UNSCHEDULED)

VCJOB = ("batch.volcano.sh", "v1alpha1", "jobs")


def _core(kube_api) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api)


def _message(err: pytest.ExceptionInfo) -> str:
    """The Status message of an ApiException (what kubectl would print)."""
    return json.loads(err.value.body)["message"]


def test_seeded_nodes_deserialise(kube_api):
    nodes = _core(kube_api).list_node()  # raises ValueError if a required field is missing
    assert nodes.metadata.resource_version
    for node in nodes.items:
        assert node.metadata.uid and node.metadata.creation_timestamp


def test_discovery_paths_with_a_trailing_slash(kube_api, twin):
    # the client asks for `/version/`, `/api/`, `/apis/apps/`…; the real server answers them all
    code = client.VersionApi(kube_api).get_code()
    assert (code.major, code.minor) == ("1", "32") and code.git_version.startswith("v1.32")
    assert client.CoreApi(kube_api).get_api_versions().versions == ["v1"]
    assert "apps" in [g.name for g in client.ApisApi(kube_api).get_api_versions().groups]
    assert client.AppsApi(kube_api).get_api_group().preferred_version.group_version == "apps/v1"
    assert "pods" in [r.name for r in client.CoreV1Api(kube_api).get_api_resources().resources]
    assert "deployments" in [r.name for r in client.AppsV1Api(kube_api).get_api_resources().resources]
    for path in ("/version", "/api", "/apis", "/api/v1", "/apis/apps", "/apis/apps/v1"):
        assert requests.get(twin.url + path + "/", timeout=5).json() == requests.get(twin.url + path, timeout=5).json()
    assert requests.get(twin.url + "/apis/example.com/", timeout=5).status_code == 404


def test_node_crud_and_gpu_capacity(kube_api):
    core = _core(kube_api)
    created = core.create_node(make_node("t-gpu-crud", gpus=4))
    try:
        assert created.metadata.uid and created.metadata.resource_version
        got = core.read_node("t-gpu-crud")
        assert got.status.allocatable["nvidia.com/gpu"] == "4"
        assert got.status.node_info.kubelet_version == "v1.32.4"
        assert "t-gpu-crud" in [n.metadata.name for n in core.list_node().items]
    finally:
        core.delete_node("t-gpu-crud")
    with pytest.raises(client.ApiException) as err:
        core.read_node("t-gpu-crud")
    assert err.value.status == 404


def test_pod_create_get_list_patch_delete(kube_api, twin_namespace):
    core, ns = _core(kube_api), twin_namespace
    created = core.create_namespaced_pod(ns, make_pod("web-1", {"app": "web", "tier": "front"}))
    core.create_namespaced_pod(ns, make_pod("db-1", {"app": "db"}))
    assert created.metadata.namespace == ns and created.metadata.uid
    assert int(created.metadata.resource_version) > 0

    assert core.read_namespaced_pod("web-1", ns).spec.containers[0].image == "busybox"
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["db-1", "web-1"]
    assert [p.metadata.name for p in core.list_namespaced_pod(ns, label_selector="app in (web),tier").items] \
        == ["web-1"]
    assert [p.metadata.name for p in core.list_namespaced_pod(ns, label_selector="app!=web").items] == ["db-1"]
    assert [p.metadata.name for p in core.list_pod_for_all_namespaces(
        field_selector=f"metadata.namespace={ns},metadata.name=db-1").items] == ["db-1"]

    patched = core.patch_namespaced_pod("web-1", ns, {"metadata": {"labels": {"tier": None, "release": "2"}}})
    assert patched.metadata.labels == {"app": "web", "release": "2"}
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)

    core.delete_namespaced_pod("web-1", ns)
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["db-1"]


def test_create_conflicts_and_stale_update(kube_api, twin_namespace):
    core, ns = _core(kube_api), twin_namespace
    pod = core.create_namespaced_pod(ns, make_pod("dup"))
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(ns, make_pod("dup"))
    assert err.value.status == 409 and 'pods "dup" already exists' in _message(err)
    core.patch_namespaced_pod("dup", ns, {"metadata": {"labels": {"x": "1"}}})
    stale = kube_api.sanitize_for_serialization(pod)
    with pytest.raises(client.ApiException) as err:
        core.replace_namespaced_pod("dup", ns, stale)
    assert err.value.status == 409 and "the object has been modified" in _message(err)


def test_generate_name_and_status_subresource(kube_api, twin_namespace):
    core, ns = _core(kube_api), twin_namespace
    pod = make_pod("")
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = "worker-"
    created = core.create_namespaced_pod(ns, pod)
    name = created.metadata.name
    assert name.startswith("worker-") and len(name) == len("worker-") + 5
    core.replace_namespaced_pod_status(name, ns, ready_status(make_pod(name)))
    got = core.read_namespaced_pod_status(name, ns)
    assert got.status.phase == "Running"
    assert {c.type: c.status for c in got.status.conditions}["Ready"] == "True"
    # a PUT of the main resource cannot change status (only /status can)
    body = kube_api.sanitize_for_serialization(got)
    body["status"]["phase"] = "Failed"
    assert core.replace_namespaced_pod(name, ns, body).status.phase == "Running"


def test_watch_times_out_and_resumes_from_resource_version(kube_api, twin_namespace):
    core, ns = _core(kube_api), twin_namespace
    core.create_namespaced_pod(ns, make_pod("w-1"))
    listed = core.list_namespaced_pod(ns)
    rv = listed.metadata.resource_version
    core.create_namespaced_pod(ns, make_pod("w-2"))
    core.patch_namespaced_pod("w-2", ns, {"metadata": {"labels": {"seen": "yes"}}})
    core.delete_namespaced_pod("w-1", ns)

    events = [(e["type"], e["object"].metadata.name)
              for e in watch.Watch().stream(core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=1)]
    assert events == [("ADDED", "w-2"), ("MODIFIED", "w-2"), ("DELETED", "w-1")]

    # no resourceVersion: the current state as ADDED, then nothing until the timeout ends the stream
    events = [(e["type"], e["object"].metadata.name)
              for e in watch.Watch().stream(core.list_namespaced_pod, ns, timeout_seconds=1)]
    assert events == [("ADDED", "w-2")]


def test_watch_with_label_selector_sees_objects_leave_the_selection(kube_api, twin_namespace):
    core, ns = _core(kube_api), twin_namespace
    core.create_namespaced_pod(ns, make_pod("sel", {"app": "a"}))
    rv = core.list_namespaced_pod(ns).metadata.resource_version
    core.patch_namespaced_pod("sel", ns, {"metadata": {"labels": {"app": "b"}}})
    events = [e["type"] for e in watch.Watch().stream(core.list_namespaced_pod, ns, label_selector="app=a",
                                                      resource_version=rv, timeout_seconds=1)]
    assert events == ["DELETED"]


def test_watch_from_a_compacted_resource_version_is_410_gone(twin_factory):
    handle = twin_factory(extra_args=["--watch-history", "5"])
    api = api_client_for(handle)
    core = client.CoreV1Api(api)
    old_rv = core.list_namespaced_pod("default").metadata.resource_version
    for i in range(8):
        core.create_namespaced_pod("default", make_pod(f"churn-{i}"))
    with pytest.raises(client.ApiException) as err:
        list(watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=old_rv, timeout_seconds=1))
    assert err.value.status == 410
    assert "too old resource version" in str(err.value)
    api.close()


def test_eviction_is_refused_with_429_under_a_pdb(kube_api, twin_namespace):
    core, policy, ns = _core(kube_api), client.PolicyV1Api(kube_api), twin_namespace
    for i in range(2):
        core.create_namespaced_pod(ns, make_pod(f"srv-{i}", {"app": "srv"}))
        core.replace_namespaced_pod_status(f"srv-{i}", ns, ready_status(make_pod(f"srv-{i}")))
    policy.create_namespaced_pod_disruption_budget(ns, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "srv"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "srv"}}}})
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "srv-0", "namespace": ns}}
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod_eviction("srv-0", ns, eviction)
    assert err.value.status == 429
    assert "Cannot evict pod as it would violate the pod's disruption budget." in _message(err)
    assert core.read_namespaced_pod("srv-0", ns).metadata.name == "srv-0"

    policy.patch_namespaced_pod_disruption_budget("srv", ns, {"spec": {"minAvailable": 1}})
    core.create_namespaced_pod_eviction("srv-0", ns, eviction)
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["srv-1"]
    # the survivor is the last healthy pod the budget needs
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod_eviction("srv-1", ns, dict(eviction, metadata={"name": "srv-1", "namespace": ns}))
    assert err.value.status == 429


def test_binding_sets_the_node(kube_api, twin_namespace):
    core, ns = _core(kube_api), twin_namespace
    core.create_namespaced_pod(ns, make_pod("unbound"))
    core.create_namespaced_pod_binding("unbound", ns, {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "unbound"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-x"}}, _preload_content=False)
    pod = core.read_namespaced_pod("unbound", ns)
    assert pod.spec.node_name == "gpu-node-x"
    assert {c.type: c.status for c in pod.status.conditions}["PodScheduled"] == "True"


def test_volcano_job_custom_object_crud(kube_api, twin_namespace):
    custom, ns = client.CustomObjectsApi(kube_api), twin_namespace
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "llm-ft"},
        "spec": {"minAvailable": 2, "schedulerName": "volcano", "queue": "training", "maxRetry": 3,
                 "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
                 "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {"containers": [
                     {"name": "trainer", "image": "trainer:1"}]}}}]},
    }
    created = custom.create_namespaced_custom_object(*VCJOB[:2], ns, VCJOB[2], job)
    assert created["metadata"]["uid"] and created["kind"] == "Job"
    got = custom.get_namespaced_custom_object(*VCJOB[:2], ns, VCJOB[2], "llm-ft")
    assert got["spec"]["minAvailable"] == 2
    listed = custom.list_namespaced_custom_object(*VCJOB[:2], ns, VCJOB[2])
    assert [j["metadata"]["name"] for j in listed["items"]] == ["llm-ft"]
    patched = custom.patch_namespaced_custom_object(*VCJOB[:2], ns, VCJOB[2], "llm-ft", {"spec": {"maxRetry": 5}})
    assert patched["spec"]["maxRetry"] == 5 and patched["metadata"]["generation"] == 2
    status = custom.patch_namespaced_custom_object_status(*VCJOB[:2], ns, VCJOB[2], "llm-ft",
                                                          {"status": {"state": {"phase": "Running"}}})
    assert status["status"]["state"]["phase"] == "Running"
    custom.delete_namespaced_custom_object(*VCJOB[:2], ns, VCJOB[2], "llm-ft")
    with pytest.raises(client.ApiException) as err:
        custom.get_namespaced_custom_object(*VCJOB[:2], ns, VCJOB[2], "llm-ft")
    assert err.value.status == 404
    assert 'jobs.batch.volcano.sh "llm-ft" not found' in _message(err)


def test_read_pod_log(kube_api, twin_namespace, twin):
    core, ns = _core(kube_api), twin_namespace
    core.create_namespaced_pod(ns, make_pod("trainer", containers=("main", "sidecar")))
    lines = "".join(f"step {i} loss 1.{i}\n" for i in range(5))
    r = requests.post(f"{twin.url}/twin/v1/namespaces/{ns}/pods/trainer/log", params={"container": "main"},
                      data=lines, timeout=5)
    assert r.status_code == 200 and r.json() == {"appended": 5}

    assert core.read_namespaced_pod_log("trainer", ns, container="main") == lines
    assert core.read_namespaced_pod_log("trainer", ns, container="main", tail_lines=2) == \
        "step 3 loss 1.3\nstep 4 loss 1.4\n"
    stamped = core.read_namespaced_pod_log("trainer", ns, container="main", timestamps=True).splitlines()
    assert stamped[0].endswith("Z step 0 loss 1.0") and stamped[0][:4].isdigit()
    assert core.read_namespaced_pod_log("trainer", ns, container="sidecar") == ""
    with pytest.raises(client.ApiException) as err:
        core.read_namespaced_pod_log("trainer", ns)
    assert err.value.status == 400 and "a container name must be specified" in _message(err)


def test_dry_run_validates_but_does_not_mutate(kube_api, twin_namespace, twin):
    core, ns = _core(kube_api), twin_namespace
    before = requests.get(f"{twin.url}/twin/v1/audit", timeout=5).json()
    seq = before[-1]["seq"] if before else 0
    out = core.create_namespaced_pod(ns, make_pod("dry"), dry_run="All")
    assert out.metadata.name == "dry"
    assert core.list_namespaced_pod(ns).items == []
    records = requests.get(f"{twin.url}/twin/v1/audit", params={"since": seq}, timeout=5).json()
    mine = [r for r in records if r.get("namespace") == ns and r.get("resource") == "pods"]  # controllers write too
    assert [(r["verb"], r["name"], r["dryRun"]) for r in mine] == [("create", "dry", True)]


def test_deployment_scale_subresource(kube_api, twin_namespace):
    apps, ns = client.AppsV1Api(kube_api), twin_namespace
    apps.create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "vllm"}},
                 "template": {"metadata": {"labels": {"app": "vllm"}},
                              "spec": {"containers": [{"name": "vllm", "image": "vllm:0.6"}]}}}})
    assert apps.read_namespaced_deployment_scale("vllm", ns).spec.replicas == 2
    apps.patch_namespaced_deployment_scale("vllm", ns, {"spec": {"replicas": 4}})
    assert apps.read_namespaced_deployment("vllm", ns).spec.replicas == 4


def test_watch_bookmarks_when_allowed(kube_api, twin_namespace, twin):
    ns = twin_namespace
    _core(kube_api).create_namespaced_pod(ns, make_pod("bm"))
    resp = requests.get(f"{twin.url}/api/v1/namespaces/{ns}/pods", timeout=30,
                        params={"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "1"})
    events = [json.loads(line) for line in resp.text.splitlines()]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    bookmark = events[-1]["object"]
    assert bookmark["kind"] == "Pod" and int(bookmark["metadata"]["resourceVersion"]) >= \
        int(events[0]["object"]["metadata"]["resourceVersion"])


def test_follow_pod_log_streams_until_the_pod_goes(kube_api, twin_namespace, twin):
    core, ns = _core(kube_api), twin_namespace
    core.create_namespaced_pod(ns, make_pod("tail"))
    append = f"{twin.url}/twin/v1/namespaces/{ns}/pods/tail/log"
    requests.post(append, data="first\n", timeout=5).raise_for_status()
    with requests.get(f"{twin.url}/api/v1/namespaces/{ns}/pods/tail/log", params={"follow": "true"},
                      stream=True, timeout=30) as stream:
        lines = stream.iter_lines(decode_unicode=True)
        assert next(lines) == "first"
        requests.post(append, data="second\nthird\n", timeout=5).raise_for_status()
        assert [next(lines), next(lines)] == ["second", "third"]
        core.delete_namespaced_pod("tail", ns)
        assert list(lines) == []  # the stream ends with the pod
