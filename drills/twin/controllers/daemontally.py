"""The pods of each DaemonSet by node, and what its status counts, kept current per pod event.

A reconcile then costs set operations over node names instead of a walk over every daemon pod: on a
4,096-node twin each of the three GPU DaemonSets has 4,096 pods, and every kubelet step of one of them
reconciles its DaemonSet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from drills.twin.controllers.podutil import controller_ref, is_terminating, ready_since

__all__ = ["DaemonTally", "Daemons", "node_of"]

Key = tuple[str, str]


@dataclass(frozen=True)
class _Pod:
    node: str
    uid: str
    since: float | None  # Ready since (twin timestamp), None when not Ready
    revision: str | None  # its controller-revision-hash label


@dataclass
class Daemons:
    """The live (not terminating) pods of one DaemonSet. The first pod on a node is its daemon there (the one
    the status counts and a duplicate cleanup keeps); the others on that node are extra."""

    pods: dict[Key, _Pod] = field(default_factory=dict)
    by_node: dict[str, dict[Key, None]] = field(default_factory=dict)  # insertion-ordered: the first is kept
    ready: set[str] = field(default_factory=set)  # nodes whose daemon is Ready
    revisions: dict[str, set[str]] = field(default_factory=dict)  # revision → nodes whose daemon has it
    crowded: set[str] = field(default_factory=set)  # nodes with more than one pod

    def nodes(self) -> set[str]:
        """Every node a pod is on or meant for ("" for a pod with neither)."""
        return set(self.by_node)

    def counts(self, wanted: set[str], revision: str, min_ready: float, now: float) -> dict[str, int]:
        """The DaemonSet status counts (kube's updateDaemonSetStatus) over the nodes in `wanted`."""
        current = self.by_node.keys() & wanted
        scheduled = len(self.by_node) - (1 if "" in self.by_node else 0)
        ready = self.ready & wanted
        if min_ready > 0:
            available = sum(1 for n in ready if now - self._daemon(n).since >= min_ready)
        else:
            available = len(ready)
        return {"currentNumberScheduled": len(current), "numberMisscheduled": scheduled - len(current),
                "desiredNumberScheduled": len(wanted), "numberReady": len(ready),
                "updatedNumberScheduled": len(self.revisions.get(revision, set()) & wanted),
                "numberAvailable": available}

    def extra(self, wanted: set[str]) -> Iterator[tuple[str, str]]:
        """(name, uid) of every pod to delete: all on nodes not wanted, all but the first on the others."""
        for node in self.by_node.keys() - wanted:
            for key in self.by_node[node]:
                yield key[1], self.pods[key].uid
        for node in self.crowded & wanted:
            for key in list(self.by_node[node])[1:]:
                yield key[1], self.pods[key].uid

    # -- upkeep ---------------------------------------------------------------------------------
    def put(self, key: Key, pod: _Pod) -> None:
        prev = self.pods.get(key)
        if prev is not None and prev.node != pod.node:
            self.drop(key)
        self.pods[key] = pod  # an update keeps its place on its node
        self.by_node.setdefault(pod.node, {})[key] = None
        self._refresh(pod.node)

    def drop(self, key: Key) -> None:
        pod = self.pods.pop(key, None)
        if pod is None:
            return
        keys = self.by_node[pod.node]
        del keys[key]
        if not keys:
            del self.by_node[pod.node]
        self._refresh(pod.node)

    def _daemon(self, node: str) -> _Pod:
        return self.pods[next(iter(self.by_node[node]))]

    def _refresh(self, node: str) -> None:
        """Bring the per-node sets in line with the node's pods (its daemon: the first)."""
        keys = self.by_node.get(node)
        daemon = self.pods[next(iter(keys))] if keys else None
        if keys and len(keys) > 1:
            self.crowded.add(node)
        else:
            self.crowded.discard(node)
        if daemon is not None and daemon.since is not None:
            self.ready.add(node)
        else:
            self.ready.discard(node)
        revision = daemon.revision if daemon is not None else None
        for other, nodes in list(self.revisions.items()):  # one or two revisions: the template's, the last one
            if other != revision and node in nodes:
                nodes.discard(node)
                if not nodes:
                    del self.revisions[other]
        if revision is not None:
            self.revisions.setdefault(revision, set()).add(node)


class DaemonTally:
    """`Daemons` of every DaemonSet by its uid, fed by the pod informer's events."""

    def __init__(self) -> None:
        self._sets: dict[str, Daemons] = {}
        self._owner: dict[Key, str] = {}  # pod key → the uid of the DaemonSet it was counted for

    def of(self, uid: str) -> Daemons:
        return self._sets.get(uid) or Daemons()

    def update(self, etype: str, pod: dict) -> dict | None:
        """Record one pod event; returns the pod's DaemonSet controller reference (None when it has none)."""
        meta = pod["metadata"]
        key = (meta.get("namespace") or "", meta.get("name", ""))
        ref = controller_ref(pod)
        ref = ref if ref and ref.get("kind") == "DaemonSet" else None
        uid = ref.get("uid", "") if ref is not None and etype != "DELETED" and not is_terminating(pod) else None
        prev = self._owner.get(key)
        if prev is not None and prev != uid:
            del self._owner[key]
            daemons = self._sets[prev]
            daemons.drop(key)
            if not daemons.pods:
                del self._sets[prev]
        if uid is not None:
            self._owner[key] = uid
            labels = meta.get("labels") or {}
            self._sets.setdefault(uid, Daemons()).put(key, _Pod(node_of(pod), meta.get("uid", ""), ready_since(pod),
                                                                labels.get("controller-revision-hash")))
        return ref


def node_of(pod: dict) -> str:
    """The node a daemon pod is on, or is meant for (its node affinity) while it waits for the scheduler."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    for term in terms:
        for field_ in term.get("matchFields") or ():
            if field_.get("key") == "metadata.name" and field_.get("values"):
                return field_["values"][0]
    return ""
