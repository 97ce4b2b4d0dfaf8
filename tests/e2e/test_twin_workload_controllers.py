"""The twin's ReplicaSet and Deployment controllers seen through the kubernetes client and kubectl.

Pods here select no node, so the scheduler never places them; the tests play kubelet by patching pod
status through the API, which makes each controller's logic visible on its own."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest
from kubernetes import client

from drills.twin.launcher import start_twin
from fixtures.twin import api_client_for
from twin_workload_helpers import NOWHERE, owned_pods, set_pod_phase, wait_for


@pytest.fixture(scope="module")
def wl_twin(tmp_path_factory):
    handle = start_twin(tmp_path_factory.mktemp("twin-wl"), profile="minimal", scale=60)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def api(wl_twin):
    api = api_client_for(wl_twin)
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def ns(api):
    name = f"wl-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    yield name
    client.CoreV1Api(api).delete_namespace(name)


def _template(app: str, image: str = "busybox:1.36") -> dict:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"nodeSelector": dict(NOWHERE), "containers": [{"name": "main", "image": image}]}}


def test_replicaset_keeps_replicas_with_new_names_and_uids(api, ns):
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    rs = apps.create_namespaced_replica_set(ns, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": _template("web")}})
    uid = rs.metadata.uid
    pods = wait_for(lambda: len(owned_pods(core, ns, uid)) == 3 and owned_pods(core, ns, uid), "3 pods")
    for pod in pods:
        assert pod.metadata.name.startswith("web-") and len(pod.metadata.name) == len("web-") + 5
        ref = pod.metadata.owner_references[0]
        assert (ref.kind, ref.name, ref.controller, ref.block_owner_deletion) == ("ReplicaSet", "web", True, True)
        assert pod.metadata.labels == {"app": "web"}
    status = wait_for(lambda: (s := apps.read_namespaced_replica_set("web", ns).status).replicas == 3 and s,
                      "status.replicas 3")  # the controller reports after it creates: wait for it, never race it
    assert status.replicas == 3 and not status.ready_replicas

    for pod in pods[:2]:
        set_pod_phase(core, pod)
    status = wait_for(lambda: (s := apps.read_namespaced_replica_set("web", ns).status).ready_replicas == 2 and s,
                      "2 ready replicas")
    assert status.available_replicas == 2 and status.fully_labeled_replicas == 3
    assert status.observed_generation == 1

    victim = pods[0]
    core.delete_namespaced_pod(victim.metadata.name, ns)
    after = wait_for(lambda: (p := owned_pods(core, ns, uid)) and len(p) == 3
                     and victim.metadata.name not in [x.metadata.name for x in p] and p, "a replacement pod")
    assert victim.metadata.uid not in {p.metadata.uid for p in after}
    assert len({p.metadata.uid for p in after}) == 3

    apps.patch_namespaced_replica_set("web", ns, {"spec": {"replicas": 1}})
    left = wait_for(lambda: len(p := owned_pods(core, ns, uid)) == 1 and p, "scale down to 1")
    assert left[0].metadata.name == pods[1].metadata.name  # the Ready pod is kept, unready ones go first
    wait_for(lambda: apps.read_namespaced_replica_set("web", ns).status.replicas == 1, "status.replicas 1")
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=web").items
    assert {"SuccessfulCreate", "SuccessfulDelete"} <= {e.reason for e in events}


def _deploy_status(apps, ns, name):
    return apps.read_namespaced_deployment(name, ns).status


def _rollout_status(wl_twin, ns: str, name: str) -> subprocess.CompletedProcess:
    return subprocess.run(["kubectl", "--kubeconfig", wl_twin.kubeconfig, "-n", ns, "rollout", "status",
                           f"deployment/{name}", "--timeout=20s"], capture_output=True, text=True, timeout=60)


def test_deployment_rollout_and_status(api, ns, wl_twin):
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    dep = apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "infer"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "infer"}}, "template": _template("infer"),
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}})
    rs1 = wait_for(lambda: apps.list_namespaced_replica_set(ns).items, "a ReplicaSet")[0]
    hsh = rs1.metadata.labels["pod-template-hash"]
    assert rs1.metadata.name == f"infer-{hsh}"
    assert rs1.metadata.owner_references[0].uid == dep.metadata.uid
    assert rs1.spec.selector.match_labels == {"app": "infer", "pod-template-hash": hsh}
    assert rs1.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    pods = wait_for(lambda: len(p := owned_pods(core, ns, rs1.metadata.uid)) == 2 and p, "2 pods")
    assert all(p.metadata.labels["pod-template-hash"] == hsh for p in pods)
    st = wait_for(lambda: (s := _deploy_status(apps, ns, "infer")).replicas == 2 and s, "status.replicas 2")
    conds = {c.type: c for c in st.conditions}
    assert conds["Available"].status == "False" and conds["Progressing"].status == "True"
    assert st.observed_generation == 1 and st.unavailable_replicas == 2

    for pod in pods:
        set_pod_phase(core, pod)
    st = wait_for(lambda: (s := _deploy_status(apps, ns, "infer")).available_replicas == 2 and s, "available 2")
    conds = {c.type: c for c in st.conditions}
    assert (conds["Available"].status, conds["Available"].reason) == ("True", "MinimumReplicasAvailable")
    assert conds["Progressing"].reason == "NewReplicaSetAvailable"
    assert conds["Progressing"].last_update_time and conds["Available"].last_transition_time
    assert st.updated_replicas == 2 and st.ready_replicas == 2
    done = _rollout_status(wl_twin, ns, "infer") if shutil.which("kubectl") else None
    if done is not None:
        assert done.returncode == 0, done.stderr
        assert 'successfully rolled out' in done.stdout

    # a new template rolls: one surge pod, the old ReplicaSet shrinks only as new pods become available
    apps.patch_namespaced_deployment("infer", ns, {"spec": {"template": _template("infer", "busybox:1.37")}})
    rs2 = wait_for(lambda: [r for r in apps.list_namespaced_replica_set(ns).items
                            if r.metadata.uid != rs1.metadata.uid], "a second ReplicaSet")[0]
    assert rs2.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    for _ in range(2):
        new = wait_for(lambda: [p for p in owned_pods(core, ns, rs2.metadata.uid) if p.status.phase == "Pending"],
                       "a pending pod of the new ReplicaSet")
        assert apps.read_namespaced_replica_set(rs1.metadata.name, ns).spec.replicas >= 1
        set_pod_phase(core, new[0])
    wait_for(lambda: apps.read_namespaced_replica_set(rs1.metadata.name, ns).spec.replicas == 0, "old RS at 0")
    st = wait_for(lambda: (s := _deploy_status(apps, ns, "infer")).replicas == 2 and s.updated_replicas == 2
                  and s.available_replicas == 2 and s, "rollout complete")
    assert st.observed_generation == 2
    assert apps.read_namespaced_deployment("infer", ns).metadata.annotations[
        "deployment.kubernetes.io/revision"] == "2"
    if shutil.which("kubectl"):
        done = _rollout_status(wl_twin, ns, "infer")
        assert done.returncode == 0, done.stderr


def test_deployment_pod_kill_is_replaced_and_status_recovers(api, ns):
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "svc"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "svc"}}, "template": _template("svc")}})
    rs = wait_for(lambda: apps.list_namespaced_replica_set(ns).items, "a ReplicaSet")[0]
    pods = wait_for(lambda: len(p := owned_pods(core, ns, rs.metadata.uid)) == 2 and p, "2 pods")
    for pod in pods:
        set_pod_phase(core, pod)
    wait_for(lambda: _deploy_status(apps, ns, "svc").available_replicas == 2, "available 2")

    core.delete_namespaced_pod(pods[0].metadata.name, ns)
    st = wait_for(lambda: (s := _deploy_status(apps, ns, "svc")).available_replicas == 1 and s, "available 1")
    assert st.unavailable_replicas == 1
    conds = {c.type: c for c in st.conditions}
    assert conds["Available"].status == "False"  # maxUnavailable 25% of 2 rounds down to 0: both must be up
    fresh = wait_for(lambda: [p for p in owned_pods(core, ns, rs.metadata.uid)
                              if p.metadata.uid not in {x.metadata.uid for x in pods}], "a replacement pod")
    set_pod_phase(core, fresh[0])
    st = wait_for(lambda: (s := _deploy_status(apps, ns, "svc")).available_replicas == 2 and s, "available 2 again")
    assert st.unavailable_replicas == 0


def test_endpoints_follow_pod_readiness(api, ns):
    core = client.CoreV1Api(api)
    core.create_namespaced_service(ns, {"metadata": {"name": "llm", "labels": {"app": "llm"}},
                                        "spec": {"selector": {"app": "llm"},
                                                 "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
    tpl = _template("llm")
    tpl["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8000}]
    pods = [core.create_namespaced_pod(ns, {"metadata": {"name": f"llm-{i}", "labels": {"app": "llm"}},
                                            "spec": tpl["spec"]}) for i in range(2)]
    core.create_namespaced_pod(ns, {"metadata": {"name": "other", "labels": {"app": "x"}}, "spec": tpl["spec"]})
    set_pod_phase(core, pods[0])
    set_pod_phase(core, pods[1], ready=False)

    def subsets():
        try:
            return core.read_namespaced_endpoints("llm", ns).subsets or []
        except client.ApiException:
            return []

    got = wait_for(lambda: (s := subsets()) and s[0].addresses and s[0].not_ready_addresses and s, "endpoints")
    assert [a.target_ref.name for a in got[0].addresses] == ["llm-0"]
    assert [a.target_ref.name for a in got[0].not_ready_addresses] == ["llm-1"]
    assert [(p.name, p.port) for p in got[0].ports] == [("http", 8000)]
    set_pod_phase(core, core.read_namespaced_pod("llm-1", ns))
    wait_for(lambda: (s := subsets()) and len(s[0].addresses or ()) == 2, "both ready")
    core.delete_namespaced_pod("llm-0", ns)
    core.delete_namespaced_pod("llm-1", ns)
    wait_for(lambda: not subsets(), "no endpoints left")


def test_pdb_status(api, ns):
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    policy.create_namespaced_pod_disruption_budget(ns, {"metadata": {"name": "keep1"},
                                                        "spec": {"minAvailable": 1,
                                                                 "selector": {"matchLabels": {"app": "p"}}}})
    pods = [core.create_namespaced_pod(ns, {"metadata": {"name": f"p-{i}", "labels": {"app": "p"}},
                                            "spec": _template("p")["spec"]}) for i in range(3)]
    for pod in pods[:2]:
        set_pod_phase(core, pod)
    st = wait_for(lambda: (s := policy.read_namespaced_pod_disruption_budget("keep1", ns).status).current_healthy == 2
                  and s, "pdb status")
    assert (st.expected_pods, st.desired_healthy, st.disruptions_allowed) == (3, 1, 1)
    assert st.conditions[0].type == "DisruptionAllowed" and st.conditions[0].status == "True"
    core.delete_namespaced_pod("p-0", ns)
    st = wait_for(lambda: (s := policy.read_namespaced_pod_disruption_budget("keep1", ns).status).current_healthy == 1
                  and s, "pdb after a loss")
    assert st.disruptions_allowed == 0 and st.conditions[0].reason == "InsufficientPods"


def test_batch_job_runs_to_completion(api, ns):
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    tpl = _template("ckpt")
    tpl["spec"]["restartPolicy"] = "Never"
    job = batch.create_namespaced_job(ns, {"metadata": {"name": "ckpt"},
                                           "spec": {"parallelism": 2, "completions": 3, "template": tpl}})
    uid = job.metadata.uid
    first = wait_for(lambda: len(p := owned_pods(core, ns, uid)) == 2 and p, "2 parallel pods")
    assert first[0].metadata.labels["batch.kubernetes.io/job-name"] == "ckpt"
    for pod in first:
        set_pod_phase(core, pod, phase="Succeeded")
    last = wait_for(lambda: len(p := owned_pods(core, ns, uid)) == 1 and p, "the third pod")
    set_pod_phase(core, last[0], phase="Succeeded")
    st = wait_for(lambda: (s := batch.read_namespaced_job("ckpt", ns).status).succeeded == 3 and s.conditions and s,
                  "job complete")
    assert "Complete" in {c.type for c in st.conditions} and st.completion_time and st.active == 0


def test_gc_removes_pods_whose_owner_is_gone(api, ns):
    core = client.CoreV1Api(api)
    orphan = {"metadata": {"name": "orphan", "labels": {"app": "o"}, "ownerReferences": [{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": str(uuid.uuid4()),
        "controller": True}]}, "spec": _template("o")["spec"]}
    core.create_namespaced_pod(ns, orphan)
    wait_for(lambda: "orphan" not in [p.metadata.name for p in core.list_namespaced_pod(ns).items],
             "the orphan collected")
