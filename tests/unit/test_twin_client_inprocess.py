"""The twin's components send their requests through the API server's application in-process
(drills/twin/api/inprocess.py). The same requests over HTTP and in-process must get the same answers, the same
errors and the same audit records: only the socket differs."""

from __future__ import annotations

import asyncio

from drills.core.clock import DilatedClock
from drills.twin.api.audit import AuditLog
from drills.twin.api.resources import by_kind
from drills.twin.api.server import ApiServer
from drills.twin.api.store import Store
from drills.twin.controllers.client import ApiError, TwinClient
from fixtures.twin import UNSCHEDULED, make_pod

PODS = by_kind("v1", "Pod")
NAMESPACES = by_kind("v1", "Namespace")
AGENT = "twin-test-component"


async def _exercise(client: TwinClient, ns: str) -> list:
    """A component's day: create, read, a missing read, a conflict, a status patch, a selector list, a delete."""
    seen: list = []
    await client.create(NAMESPACES, {"metadata": {"name": ns}})
    pod = make_pod("p", labels={"app": "x"}, scheduler_name=UNSCHEDULED)
    created = await client.create(PODS, pod, ns)
    seen.append((created["metadata"]["name"], created["status"].get("phase")))
    seen.append((await client.get(PODS, ns, "p"))["metadata"]["uid"] == created["metadata"]["uid"])
    seen.append(await client.get(PODS, ns, "absent"))
    try:
        await client.create(PODS, make_pod("p", scheduler_name=UNSCHEDULED), ns)
    except ApiError as err:
        seen.append((err.status, err.reason))
    patched = await client.patch(PODS, ns, "p", {"status": {"phase": "Running"}}, sub="status")
    seen.append(patched["status"]["phase"])
    items, rv = await client.list(PODS, ns, label_selector="app=x")
    seen.append(([i["metadata"]["name"] for i in items], rv.isdigit()))
    # a path that carries its own query string, as the kubelet's log rotation sends it
    none = await client._request("GET", f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dnone")  # noqa: SLF001
    seen.append(none["items"])
    seen.append(await client.patch(PODS, ns, "absent", {"metadata": {"labels": {"a": "b"}}}))
    seen.append(await client.delete(PODS, ns, "p", grace_period_s=0))
    seen.append(await client.delete(PODS, ns, "p", grace_period_s=0))
    return seen


def test_a_component_gets_the_same_answers_and_audit_in_process_as_over_http(tmp_path):
    async def go() -> tuple[list, list, list]:
        clock = DilatedClock(scale=60)
        store, audit = Store(clock, history=100), AuditLog(clock, tmp_path / "audit.jsonl")
        server = ApiServer(store, audit)
        url = await server.start()
        over_http = TwinClient(url, user_agent=AGENT)
        in_process = TwinClient(url, user_agent=AGENT, app=server.app)
        try:
            return await _exercise(over_http, "a"), await _exercise(in_process, "b"), audit.records()
        finally:
            await over_http.close()
            await in_process.close()
            await server.stop()

    http_seen, local_seen, records = asyncio.run(go())
    assert http_seen == local_seen
    assert local_seen[2] is None and local_seen[3] == (409, "AlreadyExists") and local_seen[4] == "Running"
    by_ns = {ns: [(r["verb"], r["resource"], r["subresource"], "NS" if r["name"] == ns else r["name"], r["code"],
                   r["userAgent"]) for r in records if r["namespace"] == ns or r["name"] == ns] for ns in ("a", "b")}
    assert by_ns["a"] == by_ns["b"] and len(by_ns["b"]) >= 6, by_ns
    assert {r[-1] for r in by_ns["b"]} == {AGENT}
