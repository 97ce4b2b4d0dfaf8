"""A node's taints changed with optimistic concurrency — one place for the node-loss fault and the acceptance gate.

A node is written all the time (its status, heartbeats): its resourceVersion moves between our read and our
write. The patch is a JSON patch guarded by a `test` op on the resourceVersion, so a concurrent taint change
is never overwritten; a node written meanwhile fails the test (422) or conflicts (409), and the change is
computed again on a fresh read, so a busy node never fails an injection or a revert.

The write that applied is timed on the cluster's clock (before its request, after its answer): a fault is
stamped by that request alone, not by the reads and refused attempts before it (on a busy node, or a busy
client, those can take longer than the write itself).
"""

from __future__ import annotations

import json
from typing import Callable

from drills.core.kube import Cluster, obj_get

__all__ = ["update_taints", "read_node"]

ATTEMPTS = 8


def update_taints(cluster: Cluster, name: str, change: Callable[[list[dict]], list[dict]], node: dict | None = None,
                  attempts: int = ATTEMPTS) -> tuple[float, float] | None:
    """Apply `change` (taints → taints) to node `name` (`node`: a copy just read, if the caller has one).
    Returns the cluster-clock times (before, after) of the write that applied; None when nothing was to change."""
    from kubernetes.client.exceptions import ApiException

    for attempt in range(attempts):
        node = node if node is not None else read_node(cluster, name)
        taints = list(obj_get(node, "spec", "taints", default=None) or [])
        wanted = change(taints)
        if wanted == taints:
            return None
        try:
            return cluster.around(lambda: _patch_taints(cluster, name, node, wanted))
        except ApiException as err:
            if err.status not in (409, 422) or attempt == attempts - 1:
                raise
            node = None


def read_node(cluster: Cluster, name: str) -> dict:
    return json.loads(cluster.core.read_node(name, _preload_content=False).data)


def _patch_taints(cluster: Cluster, name: str, node: dict, taints: list[dict]) -> None:
    rv = obj_get(node, "metadata", "resourceVersion")
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}] if rv else []
    ops.append({"op": "add", "path": "/spec/taints", "value": taints})
    cluster.core.patch_node(name, ops, _content_type="application/json-patch+json")
