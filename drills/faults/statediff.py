"""The state a scenario's faults could reach, read before the first fault and again after the reverts settled.

A revert is judged by its own read-back (readback.py); this diff is the wider account a reviewer reads next to
it (DESIGN §5b): everything the plans could reach — each node's schedulability, taints, readiness, allocatable
GPUs and labels, both ends
of each shut link, the Deployments and PodDisruptionBudgets of the namespaces the faults touched (or whose pods
ran on a lost node), and what each fault left of its own (processes, pods, files; nothing before the fault).
A value is `{"value": …, "source": …}`; `diff(before, after)` lists the keys whose value changed. Read-only.
A change is judged (fixtures/recorder.py): the platform is not as it was before the fault — FAIL not_restored,
whatever the fault's own read-back said (issue 30, class 2: what else changed is not restored either). A change
only toward health (`settled`: replicas that were still starting became Ready, a PDB allows more disruptions, a node
became Ready, its GPUs registered) is not the fault's doing: it is said, not judged — a drill started while serving
replicas loaded their model must not FAIL because they finished.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from drills.core.kube import obj_get
from drills.faults import Plan

__all__ = ["Scope", "StateWatch", "capture", "diff", "settled", "state_diff", "changes_sentence"]

log = logging.getLogger(__name__)


@dataclass
class Scope:
    """What the diff reads: grown by each plan before its fault (a namespace found on a node stays in scope)."""

    nodes: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    links: list[dict] = field(default_factory=list)  # switch-uplink undo specs (both ends)

    def add(self, cluster, plan: Plan) -> None:
        for name, _labels in plan.reach.nodes:
            if name not in self.nodes:
                self.nodes.append(name)
                for ns in _namespaces_on(cluster, name):
                    self._namespace(ns)
        for ns in plan.reach.namespaces:
            self._namespace(ns)
        if plan.kind == "switch-uplink" and plan.undo not in self.links:
            self.links.append(dict(plan.undo))

    def _namespace(self, ns: str) -> None:
        if ns not in self.namespaces:
            self.namespaces.append(ns)


@dataclass
class StateWatch:
    """One scenario's state diff: what its plans could reach, read before each plan's fault (new keys only: what an
    earlier fault changed stays as it was found before the first), and compared after the reverts settled."""

    scope: Scope = field(default_factory=Scope)
    before: dict[str, dict] = field(default_factory=dict)
    before_at: str | None = None
    left_to_site: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)

    def capture_before(self, cluster, plan: Plan, now_iso: str) -> None:
        """Read-only; a value that cannot be read is shown as unread."""
        self.scope.add(cluster, plan)
        self.before_at = self.before_at or now_iso
        for key, value in capture(cluster, self.scope).items():
            self.before.setdefault(key, value)
        self.before.setdefault(f"left by {plan.kind} {plan.target}", {"value": [], "source": "before the fault"})

    def leave_to_site(self, key: str, fields: tuple[str, ...], why: str) -> None:
        """Hand `fields` of the object `key` ("node gpu-train-01") to the site's own process: not compared after the
        reverts (a node the site's remediation cordoned for the rehearsed fault stays cordoned), and said."""
        self.left_to_site[key] = (tuple(fields), why)

    def after(self, cluster, left: Mapping[str, Iterable[str]], now_iso: str) -> dict[str, Any] | None:
        """The record's `details.state_diff` now (None: nothing was read before). `left`: per fault ("kind target")
        what its read-back found left; a planned fault never injected (refused, interrupted) left nothing."""
        if not self.before:
            return None
        planned = {k.removeprefix("left by "): () for k in self.before if k.startswith("left by ")}
        after = capture(cluster, self.scope, {**planned, **left})
        return state_diff(self.before, after, self.before_at, now_iso, self.left_to_site)


def capture(cluster, scope: Scope, left: Mapping[str, Iterable[str]] | None = None) -> dict[str, dict]:
    """Read everything in `scope` now; `left`: per fault ("kind target"), what it left in place."""
    state: dict[str, dict] = {}
    for name in scope.nodes:
        state[f"node {name}"] = _guarded(lambda n=name: _node(cluster, n))
    for undo in scope.links:
        state.update(_links(undo))
    for ns in scope.namespaces:
        state.update(_workloads(cluster, ns))
    for fault, items in (left or {}).items():
        state[f"left by {fault}"] = {"value": sorted(items), "source": "the fault's read-back"}
    return state


def diff(before: Mapping[str, dict], after: Mapping[str, dict]) -> list[dict]:
    """Each key whose value differs (or that exists on one side only), with both values and sources."""
    changed = []
    for key in list(dict.fromkeys([*before, *after])):
        b, a = before.get(key), after.get(key)
        if (b or {}).get("value") != (a or {}).get("value"):
            changed.append({"key": key, "before": (b or {}).get("value"), "after": (a or {}).get("value"),
                            "source": (a or b or {}).get("source")})
    return changed


def _more(before: Any, after: Any, _value: dict) -> bool:
    return isinstance(before, int) and isinstance(after, int) and after > before


def _ready_up_to_replicas(before: Any, after: Any, value: dict) -> bool:
    replicas = value.get("replicas")
    return _more(before, after, value) and (not isinstance(replicas, int) or after <= replicas)


# object kind (the key's first word) → field → how a value moves toward health; a change of any other field, or of
# one of these the other way, is judged
TOWARD_HEALTH = {
    "deployment": {"ready": _ready_up_to_replicas},
    "pdb": {"disruptionsAllowed": _more},
    "node": {"Ready": lambda b, a, _v: b != "True" and a == "True",
             "taints": lambda b, a, _v: _condition_taints_lifted(b, a),
             "gpu_allocatable": lambda b, a, _v: _int(a) is not None and _int(b) is not None and _int(a) > _int(b),
             "GPUHealthy": lambda b, a, _v: a is None},  # recorded only when not True: gone is healthy again
}


# the taints the node lifecycle controller sets from a node's conditions (a cordon's `unschedulable` is not one:
# lifting a cordon that was there before the fault is not ours to do)
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                    "node.kubernetes.io/network-unavailable", "node.kubernetes.io/memory-pressure",
                    "node.kubernetes.io/disk-pressure", "node.kubernetes.io/pid-pressure")


def _condition_taints_lifted(before: Any, after: Any) -> bool:
    if not isinstance(before, list) or not isinstance(after, list) or not set(after) < set(before):
        return False
    return all(t.split("=", 1)[0].split(":", 1)[0] in CONDITION_TAINTS for t in set(before) - set(after))


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def settled(change: dict) -> bool:
    """True when every field of a change moved toward health (TOWARD_HEALTH) and nothing else changed: a platform
    that finished settling during the drill, not one the drill left worse."""
    before, after = change.get("before"), change.get("after")
    rules = TOWARD_HEALTH.get(str(change.get("key", "")).split(" ", 1)[0])
    if not rules or not isinstance(before, dict) or not isinstance(after, dict):
        return False
    moved = [k for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k)]
    return bool(moved) and all(k in rules and rules[k](before.get(k), after.get(k), after) for k in moved)


def changes_sentence(changed: list[dict]) -> str:
    """What a diff's `changed` says, a clause per object and only the fields that changed ("node gpu-train-01:
    gpu_allocatable 8 → 0; pdb ai-platform/llama-7b-infer: gone")."""
    clauses = []
    for change in changed:
        before, after = change.get("before"), change.get("after")
        if isinstance(before, dict) and isinstance(after, dict):
            parts = []
            for key in dict.fromkeys([*before, *after]):
                b, a = before.get(key), after.get(key)
                if b == a:
                    continue
                if isinstance(b, dict) or isinstance(a, dict):
                    b, a = b or {}, a or {}
                    parts += [f"{key} {k}: {_shown(b.get(k))} → {_shown(a.get(k))}"
                              for k in dict.fromkeys([*b, *a]) if b.get(k) != a.get(k)]
                else:
                    parts.append(f"{key} {_shown(b)} → {_shown(a)}")
            clauses.append(f"{change['key']}: {', '.join(parts)}")
        elif after is None:
            clauses.append(f"{change['key']}: gone (was {_shown(before)})")
        elif before is None:
            clauses.append(f"{change['key']}: new ({_shown(after)})")
        else:
            clauses.append(f"{change['key']}: {_shown(before)} → {_shown(after)}")
    return "; ".join(clauses)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def state_diff(before: Mapping[str, dict], after: Mapping[str, dict], at_before: str | None,
               at_after: str | None, left_to_site: Mapping[str, tuple[tuple[str, ...], str]] | None = None
               ) -> dict[str, Any]:
    """The record's `details.state_diff`: both snapshots, when they were read, and what changed. `left_to_site`:
    object key → (fields, why) the drill hands to the site's own process (a node the site's remediation cordoned
    for the GPU fault it rehearsed stays cordoned until the site returns it): those fields are not compared, and
    the record says so."""
    handed = dict(left_to_site or {})
    changed, settling = [], []
    for change in diff(_without(before, handed), _without(after, handed)):
        (settling if settled(change) else changed).append(change)
    return {"before_at": at_before, "after_at": at_after, "changed": changed, "settled": settling,
            "left_to_site": [{"key": k, "fields": list(f), "why": why} for k, (f, why) in handed.items()],
            "before": dict(before), "after": dict(after)}


def _without(state: Mapping[str, dict], handed: Mapping[str, tuple[tuple[str, ...], str]]) -> dict[str, dict]:
    out = dict(state)
    for key, (fields, _why) in handed.items():
        entry = out.get(key)
        if entry is not None and isinstance(entry.get("value"), dict):
            out[key] = {**entry, "value": {k: v for k, v in entry["value"].items() if k not in fields}}
    return out


# -- readers ------------------------------------------------------------------------------------
def _guarded(reader) -> dict:
    try:
        return reader()
    except Exception as err:  # noqa: BLE001 — an unread value is shown as unread, never as a state
        return _unread(err)


def _unread(err: BaseException) -> dict:
    status = getattr(err, "status", None)
    why = f"{status} {getattr(err, 'reason', '')}".strip() if status is not None else (str(err) or type(err).__name__)
    return {"value": f"unreadable: {why}", "source": "read failed"}


def _node(cluster, name: str) -> dict:
    from kubernetes.client.exceptions import ApiException

    try:
        node = json.loads(cluster.core.read_node(name, _preload_content=False).data)
    except ApiException as err:
        if err.status == 404:
            return {"value": "not found", "source": f"GET nodes/{name}: 404"}
        raise
    conditions = {c.get("type"): c.get("status") for c in obj_get(node, "status", "conditions", default=None) or []}
    value = {"unschedulable": bool(obj_get(node, "spec", "unschedulable", default=False)),
             "taints": sorted(f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                              for t in obj_get(node, "spec", "taints", default=None) or []),
             "Ready": conditions.get("Ready"),
             "gpu_allocatable": obj_get(node, "status", "allocatable", "nvidia.com/gpu"),
             # what the workloads' nodeSelectors and affinities match on (a quarantine label moves a node out of a
             # job's pool as surely as a cordon); labels that only stamp a time (GPU feature discovery's
             # `nvidia.com/gfd.timestamp`) change on their own and are left out
             "labels": {k: v for k, v in sorted((obj_get(node, "metadata", "labels", default=None) or {}).items())
                        if "timestamp" not in k.lower()}}
    if conditions.get("GPUHealthy") not in (None, "True"):  # a node whose GPUs were never reported unhealthy has no
        value["GPUHealthy"] = conditions["GPUHealthy"]     # condition; healthy again is the same state as never broken
    return {"value": value, "source": f"nodes/{name} @ resourceVersion {obj_get(node, 'metadata', 'resourceVersion')}"}


def _links(undo: dict) -> dict[str, dict]:
    from drills.faults.switch.ends import read_ends

    name = f"link {undo['switch']['name']} {undo['interface']}"
    try:
        return {f"port {o.object}": {"value": o.value, "source": o.source} for o in read_ends(undo)}
    except Exception as err:  # noqa: BLE001
        return {name: _unread(err)}


def _workloads(cluster, ns: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    try:
        deployments = json.loads(cluster.apps.list_namespaced_deployment(ns, _preload_content=False).data)
        rv = obj_get(deployments, "metadata", "resourceVersion")
        for d in deployments.get("items", []):
            out[f"deployment {ns}/{d['metadata']['name']}"] = {
                "value": {"replicas": obj_get(d, "spec", "replicas"), "ready": obj_get(d, "status", "readyReplicas") or 0},
                "source": f"deployments in {ns} @ resourceVersion {rv}"}
        pdbs = json.loads(cluster.policy.list_namespaced_pod_disruption_budget(ns, _preload_content=False).data)
        rv = obj_get(pdbs, "metadata", "resourceVersion")
        for p in pdbs.get("items", []):
            spec = p.get("spec") or {}
            out[f"pdb {ns}/{p['metadata']['name']}"] = {
                "value": {"minAvailable": spec.get("minAvailable"), "maxUnavailable": spec.get("maxUnavailable"),
                          "disruptionsAllowed": obj_get(p, "status", "disruptionsAllowed")},
                "source": f"poddisruptionbudgets in {ns} @ resourceVersion {rv}"}
    except Exception as err:  # noqa: BLE001
        out[f"workloads in {ns}"] = _unread(err)
    return out


def _namespaces_on(cluster, node: str) -> list[str]:
    """The namespaces of the non-DaemonSet pods on `node` (what losing it disrupts)."""
    try:
        resp = cluster.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", _preload_content=False)
    except Exception as err:  # noqa: BLE001 — the diff is an account, not a gate: it reads what it can
        log.debug("cannot list the pods on %s: %s", node, err)
        return []
    found = []
    for pod in json.loads(resp.data).get("items", []):
        owners = obj_get(pod, "metadata", "ownerReferences", default=None) or []
        if any(o.get("kind") == "DaemonSet" for o in owners):
            continue
        ns = obj_get(pod, "metadata", "namespace")
        if ns and ns not in found:
            found.append(ns)
    return found
