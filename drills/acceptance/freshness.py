"""A GO holds only for the node its evidence was gathered on: just before the gate is lifted, each node is
read again and compared with what it was when the run planned it.

What the evidence depends on, as the API shows it: the machine (`status.nodeInfo.bootID` — a reboot clears
what the checks warmed, loaded and measured; `systemUUID`), the GPUs the device plugin registers
(`nvidia.com/gpu` capacity and allocatable), the labels that chose the node's expectation and placement
(instance type, GPU product, leaf) and the annotations that named its leaf port and rails, its taints and
cordon (a health checker that tainted it mid-run knows something the checks did not), every condition the
kubelet and node-problem-detector report with the time it last changed (a Ready that flapped, a pressure that
came and went, both leave a new `lastTransitionTime`) — and that it is still empty: a pod that tolerates the
gate taint (a debug pod, a stray job) shares the node with the checks and would be in the pool before the
node is. A node that changed between its checks
and the gate — rebooted, lost a GPU, relabelled, in use — is a `changed` no-go on the `gate` check, naming
each change: the checks judged a node that no longer exists. A node that is not healthy now — not Ready, under
Memory/Disk/PID pressure, any condition at other than its healthy status (`acceptance.healthy_conditions`;
every other type is healthy when False, node-problem-detector's convention), even one it had when planned —
is a `node_unhealthy` no-go: evidence gathered on an ailing node is no GO. A node that cannot be read is the
same no-go (unknown is not healthy).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from drills.acceptance.catalogue import GPU_PRODUCT_LABEL, INSTANCE_TYPE_LABEL
from drills.acceptance.judge import CheckResult
from drills.core.kube import obj_get
from drills.profile.acceptance import GATE_TAINT_KEY

__all__ = ["CHECK", "state", "conditions", "changes", "unhealthy", "ailing_when_planned", "planned_unhealthy",
           "recheck"]

log = logging.getLogger(__name__)

CHECK = "gate"  # the result's check: the gate's own re-read, before it lets the node in
GPU = "nvidia.com/gpu"
RDMA_ANNOTATION = "gpu-drills.io/rdma-devices"


def conditions(node: dict) -> dict[str, Any]:
    """The node's conditions as `state` names them: `Ready`, `Ready since`, `condition <type>`."""
    out: dict[str, Any] = {}
    for c in obj_get(node, "status", "conditions", default=None) or []:
        if c.get("type") == "Ready":  # a flap back to True moves only its `since`
            out["Ready"], out["Ready since"] = c.get("status"), c.get("lastTransitionTime")
        else:
            out[f"condition {c.get('type')}"] = f"{c.get('status')} since {c.get('lastTransitionTime')}"
    out.setdefault("Ready", None)
    return out


def state(node: dict, profile) -> dict[str, Any]:
    """What the evidence about `node` depends on, by name (the record prints these names)."""
    labels = obj_get(node, "metadata", "labels", default=None) or {}
    notes = obj_get(node, "metadata", "annotations", default=None) or {}
    info = obj_get(node, "status", "nodeInfo", default=None) or {}
    out: dict[str, Any] = {"bootID": info.get("bootID"), "systemUUID": info.get("systemUUID"),
                           f"capacity {GPU}": _qty(obj_get(node, "status", "capacity", default=None), GPU),
                           f"allocatable {GPU}": _qty(obj_get(node, "status", "allocatable", default=None), GPU),
                           **conditions(node)}
    for key in (INSTANCE_TYPE_LABEL, GPU_PRODUCT_LABEL, profile.faults.leaf_label):
        out[f"label {key}"] = labels.get(key)
    for key in (profile.acceptance.leaf_port_annotation, RDMA_ANNOTATION):
        out[f"annotation {key}"] = notes.get(key)
    out["taints"] = ", ".join(sorted(f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}"
                                     for t in obj_get(node, "spec", "taints", default=None) or []
                                     if t.get("key") != GATE_TAINT_KEY)) or None  # the gate's own comes after the plan
    out["cordoned"] = bool(obj_get(node, "spec", "unschedulable", default=False))
    return out


def unhealthy(now: dict[str, Any], healthy: dict[str, str]) -> list[str]:
    """Each condition of the state `now` that is not at its healthy status (`healthy`: type → status; any other
    type is healthy when False), as `type status since time`; Ready is healthy only when True."""
    want = {"Ready": "True", **healthy}
    out = [] if now.get("Ready") == "True" else [f"Ready {now.get('Ready')} since {now.get('Ready since')}"]
    for key, value in sorted(now.items()):
        if key.startswith("condition ") and value is not None:
            kind, status = key[len("condition "):], value.split(" ", 1)[0]
            if status != want.get(kind, "False"):
                out.append(f"{kind} {value}")
    return out


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Each field that differs, as `name before → after`; a node not Ready now is a change whatever it was."""
    out = [f"{k} {before.get(k)!r} → {after.get(k)!r}" for k in sorted(set(before) | set(after))
           if before.get(k) != after.get(k)]
    if after.get("Ready") != "True" and not any(c.startswith("Ready ") for c in out):
        out.append(f"Ready {after.get('Ready')!r}")
    return out


def ailing_when_planned(plan, profile) -> dict[str, list[str]]:
    """node → its conditions away from their healthy status when the run planned it (healthy nodes absent): the
    checks are not run on such a node — their evidence would be of an ailing node — and it is a no-go."""
    healthy = profile.acceptance.healthy_conditions
    return {n: found for n in plan.nodes if (st := plan.state.get(n)) is not None and (found := unhealthy(st, healthy))}


def planned_unhealthy(node: str, planned: dict, ailing: list[str]) -> CheckResult:
    """The `node_unhealthy` no-go of a node that was not healthy when the run planned it."""
    return CheckResult(node, CHECK, False, f"{node} was not healthy when the run planned it (status.conditions): "
                       f"{'; '.join(ailing)} — its checks were not run; fix the node and run the acceptance again",
                       {"planned": planned}, {}, "node_unhealthy", evidence={"conditions": ailing})


def recheck(cluster, profile, plan, node: str) -> CheckResult | None:
    """The node read again now: None when it is the node its checks judged, else a `changed` no-go."""
    from kubernetes.client.exceptions import ApiException

    before = plan.state.get(node)
    if before is None:
        return None  # a plan from before this check (tests that build one by hand)
    try:
        now = state(json.loads(cluster.core.read_node(node, _preload_content=False).data), profile)
    except ApiException as err:
        return _changed(node, before, {}, [f"the node could not be read again ({err.status} {err.reason})"])
    from drills.acceptance.plan import workload_pods

    found = changes(before, now)
    busy = workload_pods(cluster, [node]).get(node)
    if busy:
        found.append(f"it runs workload pods now: {', '.join(busy[:3])}" + (" …" if len(busy) > 3 else ""))
    if found:
        return _changed(node, before, now, found)
    ailing = unhealthy(now, profile.acceptance.healthy_conditions)
    return _unhealthy(node, before, now, ailing) if ailing else None


def _changed(node: str, before: dict, now: dict, found: list[str]) -> CheckResult:
    rebooted = " (the machine rebooted)" if any(c.startswith("bootID ") for c in found) else ""
    return CheckResult(node, CHECK, False, f"{node} changed after its checks ran{rebooted}: {'; '.join(found)} — the "
                       "evidence is of a node that no longer exists; run the acceptance again",
                       {"now": now}, {"planned": before}, "changed", evidence={"changes": found})


def _unhealthy(node: str, before: dict, now: dict, ailing: list[str]) -> CheckResult:
    return CheckResult(node, CHECK, False, f"{node} is not healthy (status.conditions): {'; '.join(ailing)} — its "
                       "checks ran on a node the kubelet reports ailing, and a GO there would admit it to the pool; "
                       "fix the node and run the acceptance again", {"now": now}, {"planned": before},
                       "node_unhealthy", evidence={"conditions": ailing})


def _qty(resources: dict | None, key: str) -> str | None:
    value = (resources or {}).get(key)
    return None if value is None else str(value)
