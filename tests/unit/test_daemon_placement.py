"""Where a DaemonSet belongs, kept per node event (daemonset.Placement): always what `eligible` says of every node.

The DaemonSet controller reconciles once per daemon pod event (thousands while a 4,096-node fleet starts); it reads
these two sets instead of walking every node, so they must follow every change of a node's labels and taints.
"""

from drills.twin.controllers.daemonset import Placement, eligible

DS = {"metadata": {"uid": "ds-1", "generation": 1}, "spec": {"template": {"spec": {
    "nodeSelector": {"gpu-drills.io/gpu": "true"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}}}


def _node(name, gpu=True, taints=()):
    return {"metadata": {"name": name, "labels": {"gpu-drills.io/gpu": "true"} if gpu else {}},
            "spec": {"taints": list(taints)}}


NO_SCHEDULE = {"key": "nvidia.com/gpu.unhealthy", "value": "xid", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "gpu-drills.io/node-loss", "value": "drill", "effect": "NoExecute"}
TOLERATED = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}


def _truth(nodes):
    return ({n["metadata"]["name"] for n in nodes.values() if eligible(DS, n)},
            {n["metadata"]["name"] for n in nodes.values() if eligible(DS, n, running=True)})


def test_the_sets_follow_labels_and_taints_as_eligible_does():
    nodes = {n: _node(n) for n in ("a", "b", "c")} | {"cpu": _node("cpu", gpu=False)}
    placed = Placement.of(DS, list(nodes.values()))
    assert (placed.wanted, placed.keep) == ({"a", "b", "c"}, {"a", "b", "c"}) == _truth(nodes)
    changes = [_node("a", taints=[NO_SCHEDULE]),  # a daemon there stays; no new one goes there
               _node("b", taints=[NO_EXECUTE]),  # evicts the daemon too
               _node("c", taints=[TOLERATED]),  # the template tolerates it: nothing changes
               _node("cpu"),  # labelled a GPU node: wanted now
               _node("a")]  # the taint went: wanted again
    for node in changes:
        nodes[node["metadata"]["name"]] = node
        placed.node_changed(node, node["metadata"]["name"])
        assert (placed.wanted, placed.keep) == _truth(nodes), node
    assert (placed.wanted, placed.keep) == ({"a", "c", "cpu"}, {"a", "c", "cpu"})


def test_a_node_that_is_gone_leaves_both_sets():
    placed = Placement.of(DS, [_node("a"), _node("b", taints=[NO_SCHEDULE])])
    assert (placed.wanted, placed.keep) == ({"a"}, {"a", "b"})
    placed.node_changed(None, "b")
    placed.node_changed(None, "a")
    assert (placed.wanted, placed.keep) == (set(), set())
