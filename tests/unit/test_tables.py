"""Table output that kubectl 1.32 renders for `get` (columns, wide columns, cells, ages in twin time)."""

import pytest

from drills.twin.api.resources import RESOURCES, by_path
from drills.twin.api.tables import human_duration, to_table, wants_table

T0 = 1_700_000_000.0          # creation time of every object below
CREATED = "2023-11-14T22:13:20Z"  # == T0


def table(group, version, plural, objs, now=T0 + 192, **kw):
    return to_table(by_path(group, version, plural), objs, resource_version="42", now=now, **kw)


def columns(tbl, priority=None):
    return [c["name"] for c in tbl["columnDefinitions"] if priority is None or c["priority"] == priority]


def row(tbl, i=0):
    """Cells of row i keyed by column name."""
    return dict(zip(columns(tbl), tbl["rows"][i]["cells"]))


@pytest.mark.parametrize("seconds, text", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (5, "5s"), (119, "119s"), (120, "2m"), (192, "3m12s"),
    (599, "9m59s"), (600, "10m"), (179 * 60, "179m"), (3 * 3600, "3h"), (5 * 3600 + 3 * 60, "5h3m"),
    (8 * 3600, "8h"), (47 * 3600, "47h"), (52 * 3600, "2d4h"), (7 * 86400, "7d"), (30 * 86400, "30d"),
    (400 * 86400, "400d"), (3 * 365 * 86400 + 10 * 86400, "3y10d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration_matches_kubectl(seconds, text):
    assert human_duration(seconds) == text


def test_wants_table():
    assert wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert not wants_table("application/json") and not wants_table(None)


def gpu_node(name="gpu-1", ready="True", unschedulable=False, allocatable="8"):
    return {"metadata": {"name": name, "creationTimestamp": CREATED,
                         "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/role": "gpu",
                                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": ready}],
                       "capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": allocatable},
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Ubuntu 22.04.4 LTS",
                                    "kernelVersion": "5.15.0-105-generic",
                                    "containerRuntimeVersion": "containerd://1.7.13"}}}


def test_table_envelope_and_metadata_objects():
    tbl = table("", "v1", "nodes", [gpu_node()])
    assert (tbl["kind"], tbl["apiVersion"], tbl["metadata"]) == ("Table", "meta.k8s.io/v1", {"resourceVersion": "42"})
    assert set(tbl["columnDefinitions"][0]) == {"name", "type", "format", "description", "priority"}
    assert tbl["columnDefinitions"][0]["format"] == "name"
    obj = tbl["rows"][0]["object"]
    assert obj["kind"] == "PartialObjectMetadata" and obj["apiVersion"] == "meta.k8s.io/v1"
    assert obj["metadata"]["name"] == "gpu-1" and "status" not in obj


def test_include_object_none_and_object():
    node = gpu_node()
    assert "object" not in table("", "v1", "nodes", [node], include_object="None")["rows"][0]
    assert table("", "v1", "nodes", [node], include_object="Object")["rows"][0]["object"] == node


def test_node_columns_and_wide_columns():
    tbl = table("", "v1", "nodes", [gpu_node()])
    assert columns(tbl, 0) == ["Name", "Status", "Roles", "Age", "Version", "GPU", "GPU-Model"]
    assert columns(tbl, 1) == ["Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"]
    assert row(tbl) == {"Name": "gpu-1", "Status": "Ready", "Roles": "gpu,worker", "Age": "3m12s",
                        "Version": "v1.32.0", "GPU": "8/8", "GPU-Model": "NVIDIA-H100-80GB-HBM3",
                        "Internal-IP": "10.0.0.11", "External-IP": "<none>", "OS-Image": "Ubuntu 22.04.4 LTS",
                        "Kernel-Version": "5.15.0-105-generic", "Container-Runtime": "containerd://1.7.13"}


@pytest.mark.parametrize("ready, unschedulable, status", [
    ("True", False, "Ready"),
    ("True", True, "Ready,SchedulingDisabled"),
    ("False", False, "NotReady"),
    ("Unknown", True, "NotReady,SchedulingDisabled"),  # kubectl: anything but True is NotReady
])
def test_node_status(ready, unschedulable, status):
    assert row(table("", "v1", "nodes", [gpu_node(ready=ready, unschedulable=unschedulable)]))["Status"] == status


def test_node_without_ready_condition_or_gpus():
    cpu = {"metadata": {"name": "cpu-1", "creationTimestamp": CREATED}, "status": {}}
    cells = row(table("", "v1", "nodes", [cpu]))
    assert (cells["Status"], cells["Roles"], cells["GPU"], cells["GPU-Model"]) == ("Unknown", "<none>", "<none>",
                                                                                   "<none>")
    assert cells["OS-Image"] == "<unknown>"
    assert row(table("", "v1", "nodes", [gpu_node(allocatable="6")]))["GPU"] == "6/8"


def pod(phase="Running", statuses=None, **extra):
    obj = {"metadata": {"name": "trainer-0", "creationTimestamp": CREATED},
           "spec": {"containers": [{"name": "main", "image": "trainer:1"}], "nodeName": "gpu-1"},
           "status": {"phase": phase, "podIPs": [{"ip": "10.1.0.5"}], "containerStatuses": statuses or []}}
    for key, value in extra.items():
        section, _, field = key.partition("__")
        obj[section][field] = value
    return obj


RUNNING = {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": CREATED}}}


def waiting(reason, restarts=0, **last):
    return {"name": "main", "ready": False, "restartCount": restarts, "state": {"waiting": {"reason": reason}},
            "lastState": last}


def test_pod_columns_and_running_row():
    tbl = table("", "v1", "pods", [pod(statuses=[RUNNING])])
    assert columns(tbl, 0) == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert columns(tbl, 1) == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    assert row(tbl) == {"Name": "trainer-0", "Ready": "1/1", "Status": "Running", "Restarts": "0", "Age": "3m12s",
                        "IP": "10.1.0.5", "Node": "gpu-1", "Nominated Node": "<none>", "Readiness Gates": "<none>"}


@pytest.mark.parametrize("obj, ready, status", [
    (pod("Pending", spec__nodeName=None), "0/1", "Pending"),
    (pod("Pending", [waiting("ContainerCreating")]), "0/1", "ContainerCreating"),
    (pod("Pending", [waiting("ImagePullBackOff")]), "0/1", "ImagePullBackOff"),
    (pod("Running", [waiting("CrashLoopBackOff", 5)]), "0/1", "CrashLoopBackOff"),
    (pod("Succeeded", [{"name": "main", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]),
     "0/1", "Completed"),
    (pod("Failed", [{"name": "main", "state": {"terminated": {"exitCode": 137}}}]), "0/1", "ExitCode:137"),
    (pod("Failed", status__reason="Evicted"), "0/1", "Evicted"),
    (pod("Running", [RUNNING], metadata__deletionTimestamp=CREATED), "1/1", "Terminating"),
    (pod("Pending", spec__initContainers=[{"name": "fetch"}],
         status__initContainerStatuses=[{"name": "fetch", "state": {"running": {}}}]), "0/1", "Init:0/1"),
    (pod("Pending", spec__initContainers=[{"name": "fetch"}],
         status__initContainerStatuses=[{"name": "fetch", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]),
     "0/1", "Init:Error"),
])
def test_pod_status_reasons(obj, ready, status):
    cells = row(table("", "v1", "pods", [obj]))
    assert (cells["Ready"], cells["Status"]) == (ready, status)


def test_pod_restarts_show_when_last_restarted():
    crashed = waiting("CrashLoopBackOff", 5, terminated={"exitCode": 1, "finishedAt": "2023-11-14T22:14:32Z"})
    cells = row(table("", "v1", "pods", [pod(statuses=[crashed])]))   # now = T0+192, finished at T0+72
    assert cells["Restarts"] == "5 (2m ago)"


def test_completed_pods_carry_row_condition():
    done = pod("Succeeded", [{"name": "main", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}])
    assert table("", "v1", "pods", [done])["rows"][0]["conditions"][0]["type"] == "Completed"
    assert "conditions" not in table("", "v1", "pods", [pod(statuses=[RUNNING])])["rows"][0]


def test_volcano_job_columns():
    vcjob = {"metadata": {"name": "llm-8b", "creationTimestamp": CREATED},
             "spec": {"minAvailable": 4, "queue": "training"},
             "status": {"state": {"phase": "Running"}, "minAvailable": 4, "running": 4, "retryCount": 1}}
    tbl = table("batch.volcano.sh", "v1alpha1", "jobs", [vcjob])
    assert columns(tbl, 0) == ["Name", "STATUS", "minAvailable", "RUNNINGS", "AGE", "QUEUE"]
    assert columns(tbl, 1) == ["RETRIES", "FAILED"]
    assert row(tbl) == {"Name": "llm-8b", "STATUS": "Running", "minAvailable": 4, "RUNNINGS": 4, "AGE": "3m12s",
                        "QUEUE": "training", "RETRIES": 1, "FAILED": None}


def test_podgroup_and_queue_columns():
    assert columns(table("scheduling.volcano.sh", "v1beta1", "podgroups", [])) == [
        "Name", "STATUS", "minMember", "RUNNINGS", "AGE", "QUEUE"]
    assert "WEIGHT" in columns(table("scheduling.volcano.sh", "v1beta1", "queues", []))


def test_deployment_replicaset_job_rows():
    deploy = {"metadata": {"name": "vllm", "creationTimestamp": CREATED},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "vllm"}},
                       "template": {"spec": {"containers": [{"name": "server", "image": "vllm:0.6"}]}}},
              "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
    cells = row(table("apps", "v1", "deployments", [deploy]))
    assert cells == {"Name": "vllm", "Ready": "2/3", "Up-to-date": 3, "Available": 2, "Age": "3m12s",
                     "Containers": "server", "Images": "vllm:0.6", "Selector": "app=vllm"}
    rs = row(table("apps", "v1", "replicasets", [deploy]))
    assert (rs["Desired"], rs["Current"], rs["Ready"]) == (3, 0, 2)
    job = {"metadata": {"name": "ckpt", "creationTimestamp": CREATED}, "spec": {"completions": 1},
           "status": {"succeeded": 1, "startTime": CREATED, "completionTime": "2023-11-14T22:14:20Z",
                      "conditions": [{"type": "Complete", "status": "True"}]}}
    cells = row(table("batch", "v1", "jobs", [job]))
    assert (cells["Status"], cells["Completions"], cells["Duration"]) == ("Complete", "1/1", "60s")


def test_service_pdb_event_rows():
    svc = {"metadata": {"name": "vllm", "creationTimestamp": CREATED},
           "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "selector": {"app": "vllm"},
                    "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "nodePort": 30443}]}}
    cells = row(table("", "v1", "services", [svc]))
    assert (cells["Type"], cells["Cluster-IP"], cells["External-IP"], cells["Port(s)"], cells["Selector"]) == (
        "NodePort", "10.96.0.10", "<none>", "80/TCP,443:30443/TCP", "app=vllm")
    pdb = {"metadata": {"name": "trainer", "creationTimestamp": CREATED}, "spec": {"minAvailable": "50%"},
           "status": {"disruptionsAllowed": 1}}
    cells = row(table("policy", "v1", "poddisruptionbudgets", [pdb]))
    assert (cells["Min Available"], cells["Max Unavailable"], cells["Allowed Disruptions"]) == ("50%", "N/A", 1)
    event = {"metadata": {"name": "trainer-0.17a", "creationTimestamp": CREATED}, "type": "Warning",
             "reason": "Evicted", "message": " The node was low on resource: memory. ", "count": 3,
             "firstTimestamp": CREATED, "lastTimestamp": "2023-11-14T22:16:00Z",
             "involvedObject": {"kind": "Pod", "name": "trainer-0"}, "source": {"component": "kubelet", "host": "gpu-1"}}
    tbl = table("", "v1", "events", [event])
    assert columns(tbl, 0) == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert row(tbl) == {"Last Seen": "32s", "Type": "Warning", "Reason": "Evicted", "Object": "pod/trainer-0",
                        "Subobject": "", "Source": "kubelet, gpu-1", "Message": "The node was low on resource: memory.",
                        "First Seen": "3m12s", "Count": 3, "Name": "trainer-0.17a"}


@pytest.mark.parametrize("rt", RESOURCES, ids=lambda rt: f"{rt.group or 'core'}/{rt.plural}")
def test_every_resource_renders_a_bare_object(rt):
    tbl = to_table(rt, [{"metadata": {"name": "x", "creationTimestamp": CREATED}}], now=T0 + 5)
    cells = tbl["rows"][0]["cells"]
    assert len(cells) == len(tbl["columnDefinitions"]) and "<error>" not in cells
    if rt.plural != "events":  # events show Last Seen/First Seen (here <unknown>) instead of an age
        assert "5s" in cells and "x" in cells


def test_unknown_resource_falls_back_to_name_and_age():
    from drills.twin.api.resources import ResourceType
    rt = ResourceType("example.com", "v1", "widgets", "Widget")
    assert columns(to_table(rt, [], now=T0)) == ["Name", "Age"]


def test_age_without_a_clock_is_unknown():
    assert row(to_table(by_path("", "v1", "nodes"), [gpu_node()]))["Age"] == "<unknown>"


def test_a_stored_objects_kept_row_is_the_row_computed_afresh_at_any_later_time():
    """Cells that do not read the clock are kept with an object's version (Entry.memo); ages, restarts' 'ago' and
    running jobs' durations must still move with time, exactly as a fresh table shows them."""
    import json

    from drills.twin.api.tables import table_body
    from drills.twin.api.watchers import Entry

    crashed = waiting("CrashLoopBackOff", 5, terminated={"exitCode": 1, "finishedAt": "2023-11-14T22:14:32Z"})
    running_job = {"metadata": {"name": "ckpt", "creationTimestamp": CREATED}, "spec": {"completions": 1},
                   "status": {"startTime": CREATED, "active": 1}}
    event = {"metadata": {"name": "e.1", "creationTimestamp": CREATED}, "type": "Normal", "reason": "Pulled",
             "count": 2, "firstTimestamp": CREATED, "lastTimestamp": "2023-11-14T22:16:00Z",
             "involvedObject": {"kind": "Pod", "name": "trainer-0"}}
    cases = [(("", "v1", "nodes"), gpu_node()), (("", "v1", "pods"), pod(statuses=[crashed])),
             (("", "v1", "pods"), pod(statuses=[RUNNING])), (("batch", "v1", "jobs"), running_job),
             (("", "v1", "events"), event)]
    for path, obj in cases:
        rt = by_path(*path)
        entry = Entry(obj)
        for include in ("Metadata", "None", "Object"):
            for now in (T0 + 192, T0 + 7_200, T0 + 400_000):
                kept = json.loads(table_body(rt, [entry], {}, now=now, include_object=include))
                fresh = json.loads(table_body(rt, [Entry(obj)], {}, now=now, include_object=include))
                assert kept == fresh == to_table(rt, [obj], now=now, include_object=include) | {"metadata": {}}, (
                    path, include, now)
        if path[2] in ("nodes", "events"):  # the age column moves although the row was kept
            ages = {row(json.loads(table_body(rt, [entry], {}, now=now))).get("Age")
                    or row(json.loads(table_body(rt, [entry], {}, now=now)))["Last Seen"] for now in (T0 + 192, T0 + 4e5)}
            assert len(ages) == 2, path
