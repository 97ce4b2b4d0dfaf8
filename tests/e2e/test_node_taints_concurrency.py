"""A node is written all the time (status, heartbeats): a taint change computed on a copy read a moment ago must
survive the node moving on. Under CPU load the acceptance gate's own guarded patch failed the run with
"could not taint node gpu-new-07: 422" — it did not retry, as the node-loss fault did. One helper for both now
(drills/faults/node_taints.py), proven here against the twin's real 422 for a failed `test` op."""

from __future__ import annotations

import json

import pytest
import requests
from kubernetes.client.exceptions import ApiException

from drills.core.kube import connect_twin
from drills.faults.node_taints import _patch_taints, read_node, update_taints

NODE = "gpu-train-01"
MARK = {"key": "example.com/probe", "value": "x", "effect": "NoSchedule"}


@pytest.fixture
def conn(twin):
    cluster = connect_twin(twin.kubeconfig, twin.url)
    yield cluster
    update_taints(cluster, NODE, lambda taints: [t for t in taints if t["key"] != MARK["key"]])
    cluster.close()


def _move_on(twin) -> None:
    """Someone else writes the node (a label): its resourceVersion moves past any copy read before."""
    resp = requests.patch(f"{twin.url}/api/v1/nodes/{NODE}", data=json.dumps({"metadata": {"labels": {"moved": "1"}}}),
                          headers={"Content-Type": "application/merge-patch+json"}, timeout=5)
    assert resp.status_code == 200, resp.text


def test_a_guarded_patch_on_a_stale_copy_is_refused_by_the_server(twin, conn):  # the premise: the guard is real
    stale = read_node(conn, NODE)
    _move_on(twin)
    with pytest.raises(ApiException) as err:
        _patch_taints(conn, NODE, stale, [MARK])
    assert err.value.status == 422


def test_a_taint_change_on_a_stale_copy_is_computed_again_and_lands(twin, conn):
    stale = read_node(conn, NODE)
    _move_on(twin)
    update_taints(conn, NODE, lambda taints: [*taints, MARK], stale)
    taints = read_node(conn, NODE)["spec"].get("taints") or []
    assert taints.count(MARK) == 1 and read_node(conn, NODE)["metadata"]["labels"]["moved"] == "1"

