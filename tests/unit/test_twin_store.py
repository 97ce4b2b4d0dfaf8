"""The twin's object store: resourceVersions, watch history and 410, finalizers, cascades, PDB arithmetic."""

from __future__ import annotations

import asyncio

import pytest

from drills.core.clock import DilatedClock
from drills.twin.api import status as st
from drills.twin.api.disruption import check_eviction, pdb_status
from drills.twin.api.resources import by_path
from drills.twin.api.store import Store

PODS = by_path("", "v1", "pods")
NAMESPACES = by_path("", "v1", "namespaces")
RS = by_path("apps", "v1", "replicasets")
PDBS = by_path("policy", "v1", "poddisruptionbudgets")


def _store(history: int = 100) -> Store:
    store = Store(DilatedClock(scale=60), history=history)
    store.create(NAMESPACES, {"metadata": {"name": "ns"}})
    return store


def _pod(name: str, labels: dict | None = None, ready: bool = True, **meta) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}, **meta},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}}


def _rs(name: str, replicas: int) -> dict:
    return {"metadata": {"name": name}, "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                                 "template": {"metadata": {"labels": {"app": name}},
                                                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def _drain(queue: asyncio.Queue) -> list[tuple[str, str]]:
    out = []
    while not queue.empty():
        etype, entry = queue.get_nowait()
        out.append((etype, entry.obj["metadata"]["name"]))
    return out


def test_resource_versions_grow_and_no_op_writes_keep_them():
    store = _store()
    a = store.create(PODS, _pod("a"), "ns")
    b = store.create(PODS, _pod("b"), "ns")
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    assert a["metadata"]["generation"] == 1 and a["metadata"]["uid"] != b["metadata"]["uid"]
    same = store.update(PODS, "ns", "a", lambda o: o)
    assert same["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]

    def relabel(obj: dict) -> dict:
        obj["metadata"]["labels"] = {"x": "1"}
        return obj

    relabelled = store.update(PODS, "ns", "a", relabel)
    assert relabelled["metadata"]["generation"] == 1  # metadata is not spec

    def reimage(obj: dict) -> dict:
        obj["spec"]["containers"][0]["image"] = "j"
        return obj

    assert store.update(PODS, "ns", "a", reimage)["metadata"]["generation"] == 2


def test_stale_replace_conflicts():
    store = _store()
    old = store.create(PODS, _pod("a"), "ns")
    store.update(PODS, "ns", "a", lambda o: dict(o, metadata=dict(o["metadata"], labels={"v": "2"})))
    with pytest.raises(st.ApiError) as err:
        store.replace(PODS, "ns", "a", dict(old, metadata=dict(old["metadata"], labels={"v": "3"})))
    assert err.value.code == 409


def test_watch_resumes_from_history_and_410s_past_it():
    store = _store(history=3)
    rv0 = int(store.resource_version)
    for name in "abcde":
        store.create(PODS, _pod(name), "ns")
    with pytest.raises(st.ApiError) as err:
        store.watch(PODS, "ns", lambda o: True, since=rv0)
    assert err.value.code == 410 and "too old resource version" in err.value.message
    watcher = store.watch(PODS, "ns", lambda o: True, since=rv0 + 3)
    assert _drain(watcher.queue) == [("ADDED", "d"), ("ADDED", "e")]
    store.delete(PODS, "ns", "d")
    assert _drain(watcher.queue) == [("DELETED", "d")]


def test_selector_watch_sees_objects_enter_and_leave():
    store = _store()
    store.create(PODS, _pod("a", {"app": "x"}), "ns")
    watcher = store.watch(PODS, None, lambda o: o["metadata"]["labels"].get("app") == "x", since=None)
    assert _drain(watcher.queue) == [("ADDED", "a")]
    store.update(PODS, "ns", "a", lambda o: dict(o, metadata=dict(o["metadata"], labels={"app": "y"})))
    store.update(PODS, "ns", "a", lambda o: dict(o, metadata=dict(o["metadata"], labels={"app": "x"})))
    assert _drain(watcher.queue) == [("DELETED", "a"), ("ADDED", "a")]


def test_finalizers_hold_deletion_until_removed():
    store = _store()
    store.create(PODS, _pod("held", finalizers=["x/y"]), "ns")
    marked = store.delete(PODS, "ns", "held")
    assert marked["metadata"]["deletionTimestamp"]
    assert store.find(PODS, "ns", "held") is not None
    store.update(PODS, "ns", "held", lambda o: dict(o, metadata=dict(o["metadata"], finalizers=[])))
    assert store.find(PODS, "ns", "held") is None


def test_deleting_an_owner_deletes_its_dependents_unless_orphaned():
    store = _store()
    rs = store.create(RS, _rs("web", 2), "ns")
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"],
           "controller": True}
    store.create(PODS, _pod("web-1", ownerReferences=[ref]), "ns")
    store.create(PODS, _pod("other"), "ns")
    store.delete(RS, "ns", "web")
    assert [p["metadata"]["name"] for p in store.list(PODS, "ns")[0]] == ["other"]


def test_namespace_deletion_removes_its_objects():
    store = _store()
    store.create(PODS, _pod("a"), "ns")
    store.delete(NAMESPACES, None, "ns")
    assert store.list(PODS)[0] == []
    with pytest.raises(st.ApiError) as err:
        store.create(PODS, _pod("b"), "ns")
    assert err.value.code == 404 and err.value.message == 'namespaces "ns" not found'


def test_pdb_arithmetic_uses_the_controller_scale_for_max_unavailable():
    store = _store()
    rs = store.create(RS, _rs("web", 3), "ns")
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"],
           "controller": True}
    for i in range(3):
        store.create(PODS, _pod(f"web-{i}", {"app": "web"}, ownerReferences=[ref]), "ns")
    pdb = store.create(PDBS, {"metadata": {"name": "web"},
                              "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}, "ns")
    assert pdb_status(store, pdb)["disruptionsAllowed"] == 1
    check_eviction(store, store.get(PODS, "ns", "web-0"))
    store.delete(PODS, "ns", "web-0")
    # the ReplicaSet still wants 3: a second eviction would leave 1 of 3 (maxUnavailable 1)
    with pytest.raises(st.ApiError) as err:
        check_eviction(store, store.get(PODS, "ns", "web-1"))
    assert err.value.code == 429
    assert err.value.message == "Cannot evict pod as it would violate the pod's disruption budget."


def test_graceful_pod_deletion_waits_for_the_kubelet_when_enabled():
    store = _store()
    store.graceful_pods = True
    on_node = _pod("on-node")
    on_node["spec"]["nodeName"] = "gpu-1"
    on_node["spec"]["terminationGracePeriodSeconds"] = 45
    store.create(PODS, on_node, "ns")
    store.create(PODS, _pod("pending"), "ns")
    marked = store.delete(PODS, "ns", "on-node")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 45 and marked["metadata"]["deletionTimestamp"]
    assert store.find(PODS, "ns", "on-node") is not None  # Terminating until its kubelet confirms
    store.delete(PODS, "ns", "on-node", grace_seconds=0)
    assert store.find(PODS, "ns", "on-node") is None
    store.delete(PODS, "ns", "pending")  # never ran anywhere: gone at once
    assert store.find(PODS, "ns", "pending") is None
