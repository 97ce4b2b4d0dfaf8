"""The twin's audit log sees the twin's own fault endpoints, so "nothing injected" checks can trust it."""

from __future__ import annotations

import requests

from drills.core.kube import USER_AGENT
from fixtures.twin import UNSCHEDULED, make_pod

DRILL = {"User-Agent": USER_AGENT}
TWIN_GROUP = "twin.gpu-drills.io"


def _audit(twin, since: int = 0) -> list[dict]:
    return requests.get(f"{twin.url}/twin/v1/audit", params={"since": since}, timeout=5).json()


def _ours(records: list[dict]) -> list[tuple]:
    return [(r["verb"], r["group"], r["resource"], r["subresource"], r["namespace"], r["name"], r["code"])
            for r in records if r["userAgent"] == USER_AGENT]


def test_fault_endpoints_are_audited_and_log_appends_are_not(twin_factory):
    twin = twin_factory(scale=600.0)
    node = requests.get(f"{twin.url}/api/v1/nodes", timeout=5).json()["items"][0]["metadata"]["name"]
    requests.post(f"{twin.url}/api/v1/namespaces", json={"metadata": {"name": "audit"}}, timeout=5).raise_for_status()
    requests.post(f"{twin.url}/api/v1/namespaces/audit/pods", json=make_pod("victim", scheduler_name=UNSCHEDULED),
                  timeout=5).raise_for_status()
    seq = (_audit(twin) or [{"seq": 0}])[-1]["seq"]

    def post(path: str, body: dict | None = None, **kw) -> requests.Response:
        return requests.post(twin.url + path, json=body, headers=DRILL, timeout=5, **kw)

    assert post(f"/twin/v1/nodes/{node}/gpu", {"state": "unhealthy", "xid": 79}).status_code == 200
    assert post(f"/twin/v1/nodes/{node}/kubelet", {"action": "stop"}).status_code == 200
    assert post(f"/twin/v1/nodes/{node}/kubelet", {"action": "start"}).status_code == 200
    assert post(f"/twin/v1/nodes/{node}/gpu", {"state": "healthy"}).status_code == 200
    assert post("/twin/v1/namespaces/audit/pods/victim/exit", {"code": 137}).status_code == 200
    assert post("/twin/v1/namespaces/audit/pods/gone/exit", {"code": 137}).status_code == 404
    assert post(f"/twin/v1/nodes/{node}/gpu", {"state": "on fire"}).status_code == 400
    appended = requests.post(f"{twin.url}/twin/v1/namespaces/audit/pods/victim/log", data="step 1\n", headers=DRILL,
                             timeout=5)
    assert appended.json() == {"appended": 1}
    assert requests.get(f"{twin.url}/twin/v1/nodes/{node}/kubelet", headers=DRILL, timeout=5).status_code == 200

    assert _ours(_audit(twin, seq)) == [
        ("create", TWIN_GROUP, "nodes", "gpu", "", node, 200),
        ("create", TWIN_GROUP, "nodes", "kubelet", "", node, 200),
        ("create", TWIN_GROUP, "nodes", "kubelet", "", node, 200),
        ("create", TWIN_GROUP, "nodes", "gpu", "", node, 200),
        ("create", TWIN_GROUP, "pods", "exit", "audit", "victim", 200),
        ("create", TWIN_GROUP, "pods", "exit", "audit", "gone", 404),
        ("create", TWIN_GROUP, "nodes", "gpu", "", node, 400),
    ]
    # the state-dir copy holds the same records
    on_disk = (twin.state_dir / "audit.jsonl").read_text()
    assert f'"path":"/twin/v1/nodes/{node}/gpu"' in on_disk and "/log" not in on_disk


def test_bulk_load_is_audited_as_a_create(twin_factory):
    twin = twin_factory(scale=600.0)
    seq = (_audit(twin) or [{"seq": 0}])[-1]["seq"]
    items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"bulk-{i}"}} for i in range(3)]
    resp = requests.post(f"{twin.url}/twin/v1/load", json={"items": items}, headers=DRILL, timeout=5)
    assert resp.status_code == 201 and resp.json() == {"created": 3}
    assert _ours(_audit(twin, seq)) == [("create", TWIN_GROUP, "load", "", "", "", 201)]
