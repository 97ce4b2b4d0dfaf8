"""Chunked lists and selectors over HTTP, as the official Python client and kubectl use them (limit/continue,
remainingItemCount, 410 Expired with an inconsistent token, field selectors per kind)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from drills.twin.launcher import TwinHandle, start_twin
from fixtures.twin import api_client_for

HISTORY = 40  # events the twin keeps per resource: a continue token older than that expires


@pytest.fixture(scope="module")
def small_history_twin(tmp_path_factory) -> TwinHandle:
    handle = start_twin(tmp_path_factory.mktemp("twin-paging"), profile="minimal",
                        extra_args=["--watch-history", str(HISTORY)])
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def core(small_history_twin):
    api = api_client_for(small_history_twin)
    try:
        yield client.CoreV1Api(api)
    finally:
        api.close()


def _namespace(core: client.CoreV1Api, name: str, configmaps: int) -> None:
    core.create_namespace({"metadata": {"name": name}})
    for i in range(configmaps):
        core.create_namespaced_config_map(name, {"metadata": {"name": f"cm-{i:02}"}, "data": {"i": str(i)}})


def _own(names) -> list[str]:
    return [n for n in names if n.startswith("cm-")]  # the twin also writes kube-root-ca.crt into namespaces


def test_the_python_client_pages_with_limit_and_continue(core):
    _namespace(core, "paged", 7)
    first = core.list_namespaced_config_map("paged", limit=3)
    assert len(first.items) == 3 and first.metadata._continue
    assert first.metadata.remaining_item_count == core.list_namespaced_config_map("paged").items.__len__() - 3
    names, token = [c.metadata.name for c in first.items], first.metadata._continue
    core.create_namespaced_config_map("paged", {"metadata": {"name": "cm-late"}})  # after the snapshot
    while token:
        page = core.list_namespaced_config_map("paged", limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version  # one snapshot
        names += [c.metadata.name for c in page.items]
        token = page.metadata._continue
    assert _own(names) == [f"cm-{i:02}" for i in range(7)]
    selected = core.list_namespaced_config_map("paged", limit=2, field_selector="metadata.name!=cm-00")
    assert selected.metadata._continue and selected.metadata.remaining_item_count is None


def test_a_stale_continue_token_is_410_expired(core):
    _namespace(core, "stale", 5)
    first = core.list_namespaced_config_map("stale", limit=2)
    _namespace(core, "churn", HISTORY + 5)  # the first page's version leaves the history
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map("stale", limit=2, _continue=first.metadata._continue)
    body = json.loads(err.value.body)
    assert err.value.status == 410 and body["reason"] == "Expired"
    assert "too old to display a consistent list result" in body["message"]
    rest = core.list_namespaced_config_map("stale", _continue=body["metadata"]["continue"])
    seen = [c.metadata.name for c in first.items + rest.items]
    assert _own(seen) == [f"cm-{i:02}" for i in range(5)]


def test_field_selectors_are_those_of_the_kind(core):
    nodes = core.list_node().items
    node = nodes[0].metadata.name
    on_node = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    assert all(p.spec.node_name == node for p in on_node)
    with pytest.raises(ApiException) as err:
        core.list_node(field_selector=f"spec.nodeName={node}")
    assert err.value.status == 400 and "field label not supported: spec.nodeName" in err.value.body


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_chunk_size_lists_everything(core, small_history_twin, tmp_path):
    _namespace(core, "chunked", 9)
    env = dict(os.environ, KUBECONFIG=small_history_twin.kubeconfig)

    def kubectl(*args: str) -> str:
        return subprocess.run(["kubectl", "--cache-dir", str(tmp_path), *args], env=env, capture_output=True,
                              text=True, check=True, timeout=60).stdout

    whole = kubectl("get", "configmaps", "-n", "chunked", "-o", "name", "--chunk-size=0")
    assert kubectl("get", "configmaps", "-n", "chunked", "-o", "name", "--chunk-size=2") == whole
    table = kubectl("get", "configmaps", "-n", "chunked", "--chunk-size=4").splitlines()
    assert table[0].split()[:2] == ["NAME", "DATA"] and len(table) == whole.count("\n") + 1
