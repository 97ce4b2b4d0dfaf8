"""A node is written all the time (status, heartbeats): a taint change computed on a copy read a moment ago must
survive the node moving on. Under CPU load the acceptance gate's own guarded patch failed the run with
"could not taint node gpu-new-07: 422" — it did not retry, as the node-loss fault did. One helper for both now
(drills/faults/node_taints.py), proven here against the twin's real 422 for a failed `test` op."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import requests
from kubernetes.client.exceptions import ApiException

from drills.core.kube import connect_twin
from drills.faults.node_taints import _patch_taints, read_node, update_taints
from tests.e2e.drill_helpers import audit_of

NODE = "gpu-train-01"
MARK = {"key": "example.com/probe", "value": "x", "effect": "NoSchedule"}


@pytest.fixture
def conn(twin):
    cluster = connect_twin(twin.kubeconfig, twin.url)
    yield cluster
    update_taints(cluster, NODE, lambda taints: [t for t in taints if t["key"] != MARK["key"]])
    cluster.close()


def _move_on(twin) -> None:
    """Someone else writes the node (a label, a new value each time: a no-op patch moves nothing): its
    resourceVersion moves past any copy read before."""
    moved = {"metadata": {"labels": {"moved": uuid.uuid4().hex[:8]}}}
    resp = requests.patch(f"{twin.url}/api/v1/nodes/{NODE}", data=json.dumps(moved),
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
    assert taints.count(MARK) == 1 and "moved" in read_node(conn, NODE)["metadata"]["labels"]



def test_the_write_that_applied_is_timed_not_the_refused_one_before_it(twin, conn):
    """A fault is stamped by the request that made it (node-loss `taint-noexecute`): under load the read and a
    refused attempt before it took 160 cluster seconds at 600×, and a stamp over all of them was 80 s early."""
    stale = read_node(conn, NODE)
    _move_on(twin)
    since = audit_of(twin)[-1]["seq"]
    start = conn.clock.timestamp()
    moved: list[float] = []

    def add_mark(taints: list[dict]) -> list[dict]:
        # the first attempt (on the stale copy, refused) takes cluster time, as under load. The twin's clock waits
        # for the twin's work (gatedclock.py): while it holds, a client's reads give one instant, and a window
        # that wrongly spanned the refused attempt could not be told from the right one by time alone
        if not moved:
            deadline = time.monotonic() + 60
            while conn.clock.timestamp() <= start + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            moved.append(conn.clock.timestamp())
        return [*taints, MARK]

    before, after = update_taints(conn, NODE, add_mark, stale)
    end = conn.clock.timestamp()
    writes = [r for r in audit_of(twin) if r["seq"] > since and r["resource"] == "nodes" and r["name"] == NODE
              and r["verb"] == "patch" and r["subresource"] == ""]
    assert [w["code"] for w in writes] == [422, 200]
    # the window is the applied write's round trip (the audit's time is the server's, the client's a copy: ± 1 s)
    assert before - 1 <= writes[1]["twinTime"] <= after + 1
    # not the refused attempt and re-read: the window opens after the first attempt's time had passed
    assert start + 1 < moved[0] <= before <= after <= end and after - before < end - start
    assert update_taints(conn, NODE, lambda taints: taints) is None  # nothing to change: nothing written, no time
