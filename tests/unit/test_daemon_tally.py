"""DaemonTally: the pods of each DaemonSet by node and its status counts, from pod events alone."""

from drills.twin.controllers.daemontally import DaemonTally

DS = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-1", "controller": True}


def _pod(name, node, *, ready=False, rev="r1", terminating=False, bound=True):
    spec = {"nodeName": node} if bound else {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}
    meta = {"name": name, "namespace": "ops", "uid": f"u-{name}", "ownerReferences": [DS],
            "labels": {"controller-revision-hash": rev}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]} \
        if ready else {}
    return {"metadata": meta, "spec": spec, "status": status}


def test_counts_follow_pod_events():
    tally = DaemonTally()
    tally.update("ADDED", _pod("a", "n1", bound=False))  # waiting for the scheduler: counted on its node
    tally.update("ADDED", _pod("b", "n2", ready=True))
    tally.update("ADDED", _pod("c", "n3", ready=True, rev="r0"))  # a node no longer wanted
    daemons = tally.of("ds-1")
    assert daemons.nodes() == {"n1", "n2", "n3"}
    assert daemons.counts({"n1", "n2", "n4"}, "r1", 0, 0) == {
        "currentNumberScheduled": 2, "numberMisscheduled": 1, "desiredNumberScheduled": 3, "numberReady": 1,
        "updatedNumberScheduled": 2, "numberAvailable": 1}
    assert list(daemons.extra({"n1", "n2", "n4"})) == [("c", "u-c")]
    tally.update("MODIFIED", _pod("a", "n1", ready=True))
    tally.update("MODIFIED", _pod("b", "n2", ready=True, terminating=True))  # terminating: no longer counted
    tally.update("DELETED", _pod("c", "n3"))
    assert tally.of("ds-1").counts({"n1", "n2"}, "r1", 0, 0)["numberReady"] == 1
    assert tally.of("ds-1").nodes() == {"n1"}


def test_the_first_pod_on_a_node_is_its_daemon_and_the_others_are_extra():
    tally = DaemonTally()
    tally.update("ADDED", _pod("a", "n1", rev="r0"))
    tally.update("ADDED", _pod("b", "n1", ready=True))
    tally.update("MODIFIED", _pod("a", "n1", rev="r0"))  # an update keeps its place
    daemons = tally.of("ds-1")
    assert list(daemons.extra({"n1"})) == [("b", "u-b")]
    assert daemons.counts({"n1"}, "r1", 0, 0)["numberReady"] == 0  # the daemon (a) is not Ready
    assert daemons.counts({"n1"}, "r1", 0, 0)["updatedNumberScheduled"] == 0
    tally.update("DELETED", _pod("a", "n1"))
    assert tally.of("ds-1").counts({"n1"}, "r1", 0, 0)["numberReady"] == 1  # b is the daemon now
    assert list(tally.of("ds-1").extra({"n1"})) == []


def test_available_waits_for_min_ready_seconds():
    tally = DaemonTally()
    tally.update("ADDED", _pod("a", "n1", ready=True))
    ready_at = tally.of("ds-1").pods[("ops", "a")].since
    assert tally.of("ds-1").counts({"n1"}, "r1", 10, ready_at + 5)["numberAvailable"] == 0
    assert tally.of("ds-1").counts({"n1"}, "r1", 10, ready_at + 10)["numberAvailable"] == 1


def test_pods_of_other_controllers_are_not_counted():
    tally = DaemonTally()
    pod = _pod("a", "n1")
    pod["metadata"]["ownerReferences"] = [{**DS, "kind": "ReplicaSet"}]
    assert tally.update("ADDED", pod) is None
    assert tally.of("ds-1").nodes() == set()
