"""Compact storage at scale: interned objects equal their input, and past versions kept as JSON only still
serve watch resumes and consistent pages exactly as the dicts they were."""

from __future__ import annotations

import json

from drills.core.clock import DilatedClock
from drills.twin.api import store as store_mod
from drills.twin.api.compact import interned
from drills.twin.api.resources import by_path
from drills.twin.api.selection import ALL
from drills.twin.api.store import Store

PODS = by_path("", "v1", "pods")
NAMESPACES = by_path("", "v1", "namespaces")


def _pod(name: str, phase: str) -> dict:
    return {"metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "registry.local/web:1"}], "nodeName": "n1"},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}}


def test_interned_objects_are_equal_and_share_their_strings():
    a = json.loads(json.dumps(_pod("a", "Running")))
    b = json.loads(json.dumps(_pod("b", "Running")))
    ia, ib = interned(a), interned(b)
    assert ia == a and ib == b
    key_a = next(k for k in ia if k == "metadata")
    key_b = next(k for k in ib if k == "metadata")
    assert key_a is key_b  # one copy of each key across objects
    assert ia["status"]["phase"] is ib["status"]["phase"]
    long = "x" * 200
    assert interned({"message": long})["message"] is long  # long values are left as they are


def test_past_versions_kept_as_json_serve_resumes_and_pages(monkeypatch):
    monkeypatch.setattr(store_mod, "COMPACT_AFTER", 2)
    store = Store(DilatedClock(scale=60), history=100)
    store.create(NAMESPACES, {"metadata": {"name": "ns"}})
    first = store.create(PODS, _pod("p", "Pending"), "ns")
    since = int(first["metadata"]["resourceVersion"])
    versions = [first]
    for phase in ("Running", "Succeeded", "Failed", "Unknown"):
        versions.append(store.update(PODS, "ns", "p", lambda o, phase=phase: {**o, "status": {**o["status"],
                                                                                         "phase": phase}},
                                     subresource="status"))
    past = store._history[PODS][1].old  # the first version: compacted, as more than 2 writes followed
    assert past._obj is None and past.obj == first
    watcher = store.watch(PODS, "ns", None, since)
    seen = []
    while not watcher.queue.empty():
        seen.append(watcher.queue.get_nowait()[1].obj["status"]["phase"])
    assert seen == ["Running", "Succeeded", "Failed", "Unknown"]
    page = store.list_page(PODS, "ns", ALL, exact_rv=since)  # the state then, rebuilt from compacted versions
    assert [e.obj for e in page.entries] == [first]


def test_the_audit_log_keeps_lines_and_serves_records_after_a_seq(tmp_path):
    from drills.twin.api import audit as audit_mod

    log = audit_mod.AuditLog(DilatedClock(scale=60), tmp_path / "audit.jsonl")
    made = [log.record(verb="patch", group="", resource="nodes", subresource="status", namespace=None, name=f"n{i}",
                       user_agent="kubelet", code=200, dry_run=False, method="PATCH", path=f"/api/v1/nodes/n{i}/status")
            for i in range(5)]
    assert log.records() == made
    assert [r["name"] for r in log.records(since=3)] == ["n3", "n4"]
    assert log.records(since=5) == []
    log.close()
    assert [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()] == made


def test_audit_records_across_compressed_blocks_keep_the_newest(monkeypatch):
    from drills.twin.api import audit as audit_mod

    monkeypatch.setattr(audit_mod, "_BLOCK", 3)
    monkeypatch.setattr(audit_mod, "_KEEP", 6)  # two blocks of three, then the oldest block goes
    log = audit_mod.AuditLog(DilatedClock(scale=60))
    for i in range(1, 11):
        log.record(verb="patch", group="", resource="nodes", subresource="status", namespace=None, name=f"n{i}",
                   user_agent="kubelet", code=200, dry_run=False, method="PATCH", path=f"/api/v1/nodes/n{i}/status")
    assert [r["seq"] for r in log.records()] == [4, 5, 6, 7, 8, 9, 10]  # blocks 4-6 and 7-9, then 10 as a line
    assert [r["seq"] for r in log.records(since=5)] == [6, 7, 8, 9, 10]
    assert [r["seq"] for r in log.records(since=9)] == [10]
    assert log.records(since=10) == []
