"""The scheduler's pure half: which nodes a pod fits (filters in kube-scheduler's plugin order, first
failing plugin per node), how to score them, the best node for a pod (`place`), and the FailedScheduling
message kube-scheduler writes
("0/6 nodes are available: 2 Insufficient nvidia.com/gpu, 4 node(s) had untolerated taint {…}.").
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, Iterator

from drills.twin.api.selectors import match_label_selector
from drills.twin.controllers.nodeutil import (
    GPU, UNSCHEDULABLE_TAINT, matches_node_selector, parse_quantity, pod_requests, untolerated,
)

__all__ = ["NodeState", "AllocatableCache", "Snapshot", "filter_node", "fits_resources", "score", "place", "named_nodes",
           "failure_message", "preemption_message", "queue_of", "may_preempt", "within_budgets", "pod_requests_cached", "ANTI_AFFINITY_REASON"]

log = logging.getLogger(__name__)

ANTI_AFFINITY_REASON = ["node(s) didn't match pod anti-affinity rules"]  # kube-scheduler's wording
_NAMED = {"cpu": "cpu", "memory": "memory", "ephemeral-storage": "ephemeral-storage"}


@dataclass
class NodeState:
    """One node as a scheduling cycle sees it: the object, allocatable and what bound pods use."""

    name: str
    node: dict
    allocatable: dict[str, float]
    used: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, node: dict, used: dict[str, float] | None, allocatable: dict[str, float] | None = None) -> "NodeState":
        """`allocatable`: the node's parsed allocatable when the caller has it (AllocatableCache), else parsed here."""
        alloc = parse_allocatable(node) if allocatable is None else allocatable
        return cls(node["metadata"]["name"], node, alloc, dict(used or {}))

    def free(self, resource: str) -> float:
        return self.allocatable.get(resource, 0.0) - self.used.get(resource, 0.0)

    def add(self, requests: dict[str, float], sign: float = 1.0) -> None:
        for name, qty in requests.items():
            self.used[name] = self.used.get(name, 0.0) + sign * qty


def parse_allocatable(node: dict) -> dict[str, float]:
    return {k: parse_quantity(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}


class AllocatableCache:
    """Each node's parsed `status.allocatable`, parsed again only when its informer object changes (informer
    objects are replaced on every event, never mutated): a scheduling cycle over 4,096 nodes then costs no
    quantity parsing for the nodes that did not change. Readers must not mutate the dicts it returns."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[dict, dict[str, float]]] = {}

    def of(self, node: dict) -> dict[str, float]:
        name = node["metadata"]["name"]
        hit = self._parsed.get(name)
        if hit is None or hit[0] is not node:
            hit = self._parsed[name] = (node, parse_allocatable(node))
        return hit[1]

    def forget(self, name: str) -> None:
        self._parsed.pop(name, None)


class Snapshot(Mapping):
    """The nodes of one scheduling cycle by name, each NodeState built on first use (then kept for the cycle,
    so what this cycle places counts): a DaemonSet pod looked up on its one node costs one NodeState, not one
    per node of the cluster; iterating builds them all (a pod that may go anywhere looks at every node)."""

    def __init__(self, node: Callable[[str], dict | None], names: Callable[[], list[str]],
                 used: dict[str, dict[str, float]], allocatable: AllocatableCache):
        self._node, self._names, self._used, self._alloc = node, names, used, allocatable
        self._states: dict[str, NodeState] = {}

    def __getitem__(self, name: str) -> NodeState:
        state = self._states.get(name)
        if state is None:
            node = self._node(name)
            if node is None:
                raise KeyError(name)
            state = self._states[name] = NodeState.of(node, self._used.get(name), self._alloc.of(node))
        return state

    def __contains__(self, name: object) -> bool:
        return name in self._states or (isinstance(name, str) and self._node(name) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter([name for name in self._names() if name in self])

    def __len__(self) -> int:
        return len(self._names())


def filter_node(pod: dict, state: NodeState, *, resources: bool = True) -> list[str]:
    """Why `pod` cannot go to this node (empty: it fits), in kube-scheduler's filter order."""
    spec = pod.get("spec") or {}
    node = state.node
    tolerations = spec.get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not any(
            (t.get("key") == UNSCHEDULABLE_TAINT or (not t.get("key") and t.get("operator") == "Exists"))
            for t in tolerations):
        return ["node(s) were unschedulable"]
    taint = untolerated([t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != UNSCHEDULABLE_TAINT],
                        tolerations)
    if taint is not None:
        return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"]
    if not matches_node_selector(pod, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    return fits_resources(pod_requests_cached(pod), state) if resources else []


def fits_resources(requests: dict[str, float], state: NodeState) -> list[str]:
    """NodeResourcesFit: every insufficient resource, as the plugin lists them."""
    out = []
    if requests.get("pods") and state.free("pods") < requests["pods"] and "pods" in state.allocatable:
        out.append("Too many pods")
    for name, qty in requests.items():
        if name == "pods" or qty <= 0:
            continue
        if state.free(name) + 1e-9 < qty:
            out.append(f"Insufficient {_NAMED.get(name, name)}")
    return out


def score(requests: dict[str, float], state: NodeState) -> float:
    """Higher is better: GPU pods bin-pack (keep whole nodes free for gangs), others spread."""
    if requests.get(GPU):
        total = state.allocatable.get(GPU, 0.0) or 1.0
        return (state.used.get(GPU, 0.0) + requests[GPU]) / total
    cpu = state.allocatable.get("cpu", 0.0) or 1.0
    return 1.0 - (state.used.get("cpu", 0.0) + requests.get("cpu", 0.0)) / cpu


def failure_message(total_nodes: int, reasons: Counter) -> str:
    """`0/N nodes are available: <count> <reason>, … .` with reasons sorted as kube-scheduler sorts them."""
    parts = sorted(f"{n} {reason}" for reason, n in reasons.items())
    return f"0/{total_nodes} nodes are available: {', '.join(parts)}."


def preemption_message(total_nodes: int, helpful: int, not_helpful: int, never: bool = False) -> str:
    if never:
        return "preemption: not eligible due to preemptionPolicy=Never."
    parts = []
    if helpful:
        parts.append(f"{helpful} No preemption victims found for incoming pod")
    if not_helpful:
        parts.append(f"{not_helpful} Preemption is not helpful for scheduling")
    return f"preemption: 0/{total_nodes} nodes are available: {', '.join(sorted(parts))}."


_REQ_CACHE: dict[str, dict[str, float]] = {}


def pod_requests_cached(pod: dict) -> dict[str, float]:
    """pod_requests by uid (a pod's resources are immutable), so filtering 1,024 nodes parses once."""
    uid = (pod.get("metadata") or {}).get("uid")
    if not uid:
        return pod_requests(pod)
    req = _REQ_CACHE.get(uid)
    if req is None:
        if len(_REQ_CACHE) > 20000:
            _REQ_CACHE.clear()
        req = _REQ_CACHE[uid] = pod_requests(pod)
    return req


def place(pod: dict, req: dict, states: Mapping[str, NodeState], spread=None,
           repels=None) -> tuple[NodeState | None, Counter]:
    """The best node for `pod`, or None and why each node failed (kube-scheduler's first failing filter).

    Nodes the pod's nodeSelector or `metadata.name` node affinity rules out are set aside by a cheap look at
    their labels (kube-scheduler's NodeAffinity PreFilter does the same), so a pod bound for 4 training nodes
    of 4,096 costs 4 full filter runs; their exact reasons are computed only when no node fits.
    """
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    named = named_nodes(spec)
    reasons: Counter = Counter()
    best, best_key = None, None
    aside: list[NodeState] = []
    if named is not None:  # a DaemonSet pod: its node alone, looked up, not searched for
        candidates = [states[name] for name in sorted(named) if name in states]
    else:
        candidates = list(states.values())
    for st in candidates:
        if selector:
            labels = (st.node.get("metadata") or {}).get("labels") or {}
            if any(labels.get(k) != v for k, v in selector.items()):
                aside.append(st)
                continue
        why = filter_node(pod, st) or (ANTI_AFFINITY_REASON if repels is not None and repels(st.name) else [])
        if why:
            reasons.update(why)
            continue
        rank = (-score(req, st) + (spread(st.name) if spread else 0), st.name)
        if best_key is None or rank < best_key:
            best, best_key = st, rank
    if best is None:
        if named is not None:
            aside += [st for name, st in states.items() if name not in named]
        for st in aside:
            reasons.update(filter_node(pod, st) or (ANTI_AFFINITY_REASON if repels is not None and repels(st.name)
                                                    else []))
    return best, reasons


def named_nodes(spec: dict) -> set[str] | None:
    """The node names required node affinity allows by `matchFields metadata.name In` in every term (a
    DaemonSet pod's one node), or None when the terms allow nodes by other means."""
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    names: set[str] = set()
    for term in required.get("nodeSelectorTerms") or [None]:
        fields = [e for e in (term or {}).get("matchFields") or ()
                  if e.get("key") == "metadata.name" and e.get("operator") == "In"]
        if not fields:
            return None
        names.update(fields[0].get("values") or ())
    return names


QUEUE_ANNOTATIONS = ("scheduling.volcano.sh/queue-name", "volcano.sh/queue-name")  # a pod's own; a Volcano Job's pods


def queue_of(pod: dict) -> str:
    """The Volcano queue a pod is scheduled in (its annotation or its job's label; else Volcano's `default`)."""
    meta = pod.get("metadata") or {}
    for key in QUEUE_ANNOTATIONS:
        value = (meta.get("annotations") or {}).get(key) or (meta.get("labels") or {}).get(key)
        if value:
            return value
    return "default"


def may_preempt(preemptor: dict, prio: int, victim: dict, vprio: int, reclaimable: Callable[[str], bool]) -> bool:
    """Whether `preemptor` may take `victim`'s place. kube-scheduler: a lower priority. Volcano (schedulerName
    volcano): within one queue its `preempt` action takes lower-priority pods; across queues only its `reclaim`
    action takes pods, and only from a queue marked `reclaimable` — whatever their priority (the priority plugin
    orders preempt, it does not guard reclaim). Queues' deserved shares (the proportion plugin) are not modelled:
    a reclaimable queue is taken from whenever a pod of another queue needs room."""
    if (preemptor.get("spec") or {}).get("schedulerName") != "volcano":
        return vprio < prio
    queue = queue_of(victim)
    if queue == queue_of(preemptor):
        return vprio < prio
    return reclaimable(queue)


def within_budgets(victim: dict, budgets: list[list] | None) -> bool:
    """Whether taking `victim` keeps every budget that selects it (and counts it against them)."""
    if budgets is None:
        return True
    meta = victim.get("metadata") or {}
    mine = [b for b in budgets if b[0] == meta.get("namespace") and match_label_selector(b[1], meta.get("labels") or {})]
    if any(b[2] <= 0 for b in mine):
        return False
    for b in mine:
        b[2] -= 1
    return True
