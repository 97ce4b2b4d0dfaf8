# WARNING: takes new GPU nodes out of scheduling: adds the taint gpu-drills.io/unaccepted:NoSchedule.
# `revert` removes the taint this run added; a node that failed acceptance keeps it on purpose (`keep`).
"""The acceptance gate as an inject/revert pair: new nodes stay out of the pool until accepted.

`plan(target, profile, nodes=[…])` reads the nodes (they must exist) and journals which of them lack the
taint; `inject` adds `gpu-drills.io/unaccepted=pending:NoSchedule` to those; `revert(target, undo,
record)` removes it from exactly those, idempotently — what `drills revert` and an interrupted run do.
At the end of a run `release(cluster, node)` untaints a node that passed and `keep(cluster, node,
reason)` leaves a failing node tainted with the reason as an annotation and a Warning event.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

from drills.core.errors import InjectionFailed, RevertFailed
from drills.core.kube import Cluster, obj_get
from drills.faults import Plan, Reach
from drills.faults.node_taints import update_taints
from drills.profile.acceptance import GATE_TAINT_KEY

__all__ = ["KIND", "TAINT", "REASON_ANNOTATION", "VERDICT_ANNOTATION", "IDENTITY_ANNOTATION", "GateRecord", "plan",
           "inject", "revert", "verify", "release", "keep", "has_taint"]

log = logging.getLogger(__name__)

KIND = "accept-gate"
TAINT = {"key": GATE_TAINT_KEY, "value": "pending", "effect": "NoSchedule"}
VERDICT_ANNOTATION = "gpu-drills.io/acceptance"
REASON_ANNOTATION = "gpu-drills.io/acceptance-reason"
IDENTITY_ANNOTATION = "gpu-drills.io/accepted-identity"  # {"gpus": [UUID…], "nics": [GUID…]} of an accepted node


@dataclass(frozen=True)
class GateRecord:
    nodes: tuple[str, ...]  # the nodes this run tainted
    injected_at: str

    def to_dict(self) -> dict:
        return {**asdict(self), "nodes": list(self.nodes)}


def plan(target, profile, *, nodes: list[str]) -> Plan:
    cluster = target.cluster
    current = {name: _read(cluster, name) for name in nodes}
    fresh = [n for n, obj in current.items() if not has_taint(obj)]
    reach = Reach(nodes=tuple((n, obj_get(o, "metadata", "labels", default=None) or {}) for n, o in current.items()))
    return Plan(KIND, ",".join(nodes), f"taint {len(fresh)} new node(s) {GATE_TAINT_KEY}:NoSchedule until accepted",
                {"nodes": fresh, "taint": TAINT}, reach, spec=fresh)


def inject(target, plan: Plan) -> GateRecord:
    cluster = target.cluster
    for name in plan.spec:
        try:
            update_taints(cluster, name, lambda taints: taints if _gated(taints) else [*taints, TAINT],
                          _read(cluster, name))
        except Exception as err:  # half in place: the undo spec covers every node of the plan
            raise InjectionFailed(f"could not taint node {name}: {_why(err)}") from err
    return GateRecord(tuple(plan.spec), cluster.clock.iso(cluster.clock.now()))


def revert(target, undo: dict, record: dict | None = None) -> str:
    for name in undo.get("nodes") or ():
        release(target.cluster, name)
    return "reverted"


def release(cluster: Cluster, name: str) -> bool:
    """Remove the gate taint from `name` (idempotent); whether it was there."""
    from kubernetes.client.exceptions import ApiException

    try:
        node = _read(cluster, name)
        if not has_taint(node):
            return False
        update_taints(cluster, name, lambda taints: [t for t in taints if t.get("key") != GATE_TAINT_KEY], node)
        return True
    except ApiException as err:
        if err.status == 404:
            return False
        raise RevertFailed(f"could not untaint node {name}: {err.status} {err.reason}; run `drills revert`") from None


def keep(cluster: Cluster, name: str, reason: str) -> None:
    """A node that failed acceptance keeps the taint; its annotation and a Warning event say why."""
    cluster.core.patch_node(name, {"metadata": {"annotations": {VERDICT_ANNOTATION: "no-go",
                                                                REASON_ANNOTATION: reason[:1000]}}},
                            _content_type="application/merge-patch+json")
    now = cluster.clock.iso(cluster.clock.now())
    event = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"generateName": f"{name}.acceptance-", "namespace": "default"},
             "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": name},
             "reason": "AcceptanceFailed", "message": reason[:1000], "type": "Warning",
             "source": {"component": "gpu-drills-accept"}, "firstTimestamp": now, "lastTimestamp": now, "count": 1}
    cluster.core.create_namespaced_event("default", event)


def accepted(cluster: Cluster, name: str, identity: dict | None = None) -> None:
    """A node that passed: the annotation says so (its taint is released separately), and records the
    hardware identities it was accepted with (GPU UUIDs, NIC GUIDs), which later runs must not see elsewhere."""
    notes = {VERDICT_ANNOTATION: "go", REASON_ANNOTATION: None}
    if identity:
        notes[IDENTITY_ANNOTATION] = json.dumps(identity, sort_keys=True)
    cluster.core.patch_node(name, {"metadata": {"annotations": notes}}, _content_type="application/merge-patch+json")


def has_taint(node: dict) -> bool:
    return _gated(obj_get(node, "spec", "taints", default=None) or [])


def _gated(taints: list[dict]) -> bool:
    return any(t.get("key") == GATE_TAINT_KEY for t in taints)


def _read(cluster: Cluster, name: str) -> dict:
    from kubernetes.client.exceptions import ApiException

    try:
        return json.loads(cluster.core.read_node(name, _preload_content=False).data)
    except ApiException as err:
        if err.status == 404:
            raise InjectionFailed(f"node {name} not found; name existing nodes (kubectl get nodes)",
                                  changed=False) from None
        raise


def _why(err: BaseException) -> str:
    status = getattr(err, "status", None)
    return f"{status} {getattr(err, 'reason', '')}".strip() if status is not None else (str(err) or type(err).__name__)


def verify(target, undo: dict, record: dict | None = None) -> "Reading":
    """Read the nodes back: none of the ones this entry gated still has the gate taint."""
    from drills.faults.readback import Observation, read

    def reader():
        from kubernetes.client.exceptions import ApiException

        seen = []
        for name in undo.get("nodes") or ():
            try:
                tainted = has_taint(json.loads(target.cluster.core.read_node(name, _preload_content=False).data))
            except ApiException as err:
                if err.status != 404:
                    raise
                tainted = False
            seen.append(Observation(f"node {name}", f"taint {GATE_TAINT_KEY} {'present' if tainted else 'absent'}",
                                    f"nodes/{name}", not tainted))
        return seen, ()

    return read(KIND, ",".join(undo.get("nodes") or ()), reader)
