"""Bad requests get the real API server's status code and a clear Status message; many watchers are fine."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
import requests

from fixtures.twin import make_pod

JSON = {"Content-Type": "application/json"}


def _status(resp: requests.Response, code: int, reason: str) -> str:
    """Assert `resp` is a Failure Status with `code`/`reason`; return its message."""
    body = resp.json()
    assert resp.status_code == code, body
    assert (body["kind"], body["apiVersion"], body["status"], body["code"], body["reason"]) == \
        ("Status", "v1", "Failure", code, reason)
    return body["message"]


@pytest.fixture
def pods_url(twin, twin_namespace) -> str:
    return f"{twin.url}/api/v1/namespaces/{twin_namespace}/pods"


def test_malformed_json_is_400(pods_url):
    msg = _status(requests.post(pods_url, data="{not json", headers=JSON, timeout=5), 400, "BadRequest")
    assert "json parse error" in msg and "must be of type Pod" in msg


def test_unknown_resource_is_404(twin):
    for path in ("/api/v1/widgets", "/apis/example.com/v1/gadgets", "/api/v1/namespaces/default/widgets/x"):
        msg = _status(requests.get(twin.url + path, timeout=5), 404, "NotFound")
        assert msg == "the server could not find the requested resource"


def test_wrong_kind_in_body_is_400(pods_url):
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {}}
    msg = _status(requests.post(pods_url, json=svc, timeout=5), 400, "BadRequest")
    assert 'Service in version "v1" cannot be handled as a Pod' in msg
    deploy = dict(make_pod("y"), apiVersion="apps/v1")
    msg = _status(requests.post(pods_url, json=deploy, timeout=5), 400, "BadRequest")
    assert "cannot be handled as a Pod" in msg


def test_patch_of_a_missing_object_is_404(pods_url):
    resp = requests.patch(f"{pods_url}/ghost", data=json.dumps({"metadata": {"labels": {"a": "b"}}}),
                          headers={"Content-Type": "application/merge-patch+json"}, timeout=5)
    assert _status(resp, 404, "NotFound") == 'pods "ghost" not found'


def test_unsupported_patch_type_is_415(pods_url):
    requests.post(pods_url, json=make_pod("p415"), timeout=5).raise_for_status()
    resp = requests.patch(f"{pods_url}/p415", data="{}", headers={"Content-Type": "text/plain"}, timeout=5)
    assert "application/merge-patch+json" in _status(resp, 415, "UnsupportedMediaType")


def test_json_patch_must_be_a_list_of_operations(pods_url):
    """An object under application/json-patch+json is a 400, as the real server's jsonpatch.DecodePatch says.

    (kubernetes client 37 never sends one: its REST layer turns a dict body under the JSON-patch default
    into a strategic merge patch, so `patch_node(name, {...})` merges and `patch_node(name, [ops])` JSON-patches.)"""
    requests.post(pods_url, json=make_pod("jp"), timeout=5).raise_for_status()
    jp = {"Content-Type": "application/json-patch+json"}
    as_object = requests.patch(f"{pods_url}/jp", data=json.dumps({"metadata": {"labels": {"a": "b"}}}), headers=jp,
                               timeout=5)
    assert _status(as_object, 400, "BadRequest") == "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    of_strings = requests.patch(f"{pods_url}/jp", data='["add"]', headers=jp, timeout=5)
    assert _status(of_strings, 400, "BadRequest") == ("json: cannot unmarshal string into Go value of type "
                                                      "jsonpatch.Operation")
    assert not requests.get(f"{pods_url}/jp", timeout=5).json()["metadata"].get("labels")
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    assert requests.patch(f"{pods_url}/jp", data=json.dumps(ops), headers=jp, timeout=5).json()["metadata"]["labels"] \
        == {"a": "b"}


def test_invalid_objects_are_422(pods_url):
    msg = _status(requests.post(pods_url, json=make_pod("Bad_Name"), timeout=5), 422, "Invalid")
    assert msg.startswith('Pod "Bad_Name" is invalid: metadata.name: Invalid value')
    no_containers = dict(make_pod("empty"), spec={"containers": []})
    msg = _status(requests.post(pods_url, json=no_containers, timeout=5), 422, "Invalid")
    assert msg == 'Pod "empty" is invalid: spec.containers: Required value'


def test_missing_namespace_and_wrong_method(twin):
    msg = _status(requests.post(f"{twin.url}/api/v1/namespaces/nowhere/pods", json=make_pod("x"), timeout=5),
                  404, "NotFound")
    assert msg == 'namespaces "nowhere" not found'
    _status(requests.put(f"{twin.url}/api/v1/namespaces/default/pods", json=make_pod("x"), timeout=5),
            405, "MethodNotAllowed")


def test_delete_of_a_missing_object_is_404(pods_url):
    assert _status(requests.delete(f"{pods_url}/ghost", timeout=5), 404, "NotFound") == 'pods "ghost" not found'


def test_survives_100_concurrent_watchers(twin, twin_namespace, pods_url):
    """100 open watches all see a new pod; lists keep answering meanwhile; closed watches are released."""

    async def scenario() -> tuple[list[str], int]:
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:
            rv = (await (await session.get(pods_url)).json())["metadata"]["resourceVersion"]
            streams = [await session.get(pods_url, params={"watch": "1", "resourceVersion": rv,
                                                             "timeoutSeconds": "30"}) for _ in range(100)]
            async with session.post(pods_url, json=make_pod("watched")) as created:
                assert created.status == 201
            names = []
            for resp in streams:
                event = json.loads(await resp.content.readline())
                names.append(f'{event["type"]}/{event["object"]["metadata"]["name"]}')
            async with session.get(f"{twin.url}/api/v1/pods") as listed:
                list_status = listed.status
            for resp in streams:
                resp.close()
            return names, list_status

    def open_watches() -> int:
        return requests.get(f"{twin.url}/twin/v1/stats", timeout=5).json()["watches"]

    baseline = open_watches()  # the twin's own controllers watch too
    names, list_status = asyncio.run(scenario())
    assert names == ["ADDED/watched"] * 100
    assert list_status == 200
    deadline = time.monotonic() + 30
    while open_watches() > baseline:
        assert time.monotonic() < deadline, "closed watches were never released"
        time.sleep(0.2)


def test_stats_list_each_open_watch_with_its_selectors(twin, twin_namespace, pods_url):
    """A test can tell its own client's watch from the controllers' (kubectl wait: one pod by field selector)."""

    def mine() -> list[dict]:
        watchers = requests.get(f"{twin.url}/twin/v1/stats", timeout=5).json()["watchers"]
        return [w for w in watchers if w["userAgent"] == "watch-probe/1"]

    params = {"watch": "1", "fieldSelector": "metadata.name=held", "labelSelector": "app=x", "timeoutSeconds": "30"}
    with requests.get(pods_url, params=params, headers={"User-Agent": "watch-probe/1"}, stream=True, timeout=30):
        deadline = time.monotonic() + 30
        while not mine():
            assert time.monotonic() < deadline, "the watch never showed in /twin/v1/stats"
            time.sleep(0.05)
        assert mine() == [{"resource": "pods", "group": "", "namespace": twin_namespace, "name": None,
                           "labelSelector": "app=x", "fieldSelector": "metadata.name=held",
                           "userAgent": "watch-probe/1"}]
    deadline = time.monotonic() + 30
    while mine():
        assert time.monotonic() < deadline, "a closed watch stayed listed"
        time.sleep(0.05)
