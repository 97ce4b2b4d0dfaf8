# WARNING: creates one short-lived pod in the job's namespace that mounts the job's checkpoint volume READ-ONLY
# (it runs `sleep` and answers `find`/`cat` over exec); `revert` deletes it.
"""The store reader's pod as an inject/revert pair, so the object the drill creates to read the checkpoint
store is journaled (fsynced before it is created), allowlisted (its namespace) and removed like any fault's —
by the scenario's teardown, or by `drills revert` after a crash. It changes nothing on the platform: every
volume it mounts is `readOnly`, its root file system is read-only, it runs as non-root with no privileges.

`plan(target, profile, namespace=, name=, volumes=, mounts=, image=, node=, timeout_s=)` names the pod;
`inject` creates it and waits (cluster time, watch) until it is Running — InjectionFailed, with the scheduler's
or kubelet's reason, when it does not start in time (a volume another node holds ReadWriteOnce, an image not
pulled); `revert` deletes it (grace 0) and waits until it is gone; a missing pod is nothing to undo.
"""

from __future__ import annotations

import json
import logging

from drills.core.clock import STOP_WALL_FLOOR_S
from drills.core.errors import InjectionFailed, RevertFailed
from drills.core.kube import EventMerger, obj_get
from drills.faults import NOTHING_TO_UNDO, REVERTED, Plan, Reach

__all__ = ["KIND", "ROLE_LABEL", "plan", "inject", "revert", "verify", "pod_body"]

log = logging.getLogger(__name__)

KIND = "store-reader"
ROLE_LABEL = "gpu-drills.io/role"
DELETE_TIMEOUT_S = 120.0


def pod_body(namespace: str, name: str, image: str, volumes: list[dict], mounts: list[dict],
             node: str | None = None) -> dict:
    """The reader pod: the job's volumes, each mounted read-only where the job mounts it; `sleep` until deleted."""
    spec: dict = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": 3600,  # a crashed drill's reader ends on its own
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "reader", "image": image, "command": ["sleep", "3600"],
            "volumeMounts": [{**m, "readOnly": True} for m in mounts],
            "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}},
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        }],
        "volumes": volumes,
        "tolerations": [{"operator": "Exists"}],  # the store is mounted on GPU nodes too; the reader reads only
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {ROLE_LABEL: KIND}}, "spec": spec}


def plan(target, profile, *, namespace: str, name: str, volumes: list[dict], mounts: list[dict], image: str,
         node: str | None = None, timeout_s: float = 120.0) -> Plan:
    body = pod_body(namespace, name, image, volumes, mounts, node)
    claims = ", ".join(v.get("persistentVolumeClaim", {}).get("claimName", v.get("name", "?")) for v in volumes)
    return Plan(KIND, f"{namespace}/{name}", f"read the checkpoint store ({claims}) from a read-only pod "
                f"{namespace}/{name}", {"namespace": namespace, "pod": name}, Reach(namespaces=(namespace,)),
                spec={"body": body, "timeout_s": timeout_s})


def inject(target, plan: Plan) -> dict:
    from kubernetes.client.exceptions import ApiException

    cluster, ns, name = target.cluster, plan.undo["namespace"], plan.undo["pod"]
    try:
        cluster.core.create_namespaced_pod(ns, plan.spec["body"], _preload_content=False)
    except ApiException as err:
        raise InjectionFailed(f"could not create the store reader pod {ns}/{name}: {err.status} {err.reason}",
                              changed=False) from None
    deadline = cluster.clock.deadline(plan.spec["timeout_s"], STOP_WALL_FLOOR_S)
    why = "not scheduled"
    with EventMerger(cluster.clock) as merger:
        merger.watch("pod", cluster.core.list_namespaced_pod, ns, field_selector=f"metadata.name={name}")
        for event in merger.events(deadline):
            if event is None or not isinstance(event.obj, dict):
                continue
            phase = obj_get(event.obj, "status", "phase")
            if phase == "Running":
                return {"namespace": ns, "pod": name, "node": obj_get(event.obj, "spec", "nodeName"),
                        "running_at": cluster.clock.iso(cluster.clock.now())}
            if phase in ("Failed", "Succeeded") or event.type == "DELETED":
                raise InjectionFailed(f"store reader pod {ns}/{name} ended ({phase or 'deleted'}) before it ran")
            conds = obj_get(event.obj, "status", "conditions", default=None) or []
            waiting = [obj_get(s, "state", "waiting", "reason") for s in
                       obj_get(event.obj, "status", "containerStatuses", default=None) or []]
            why = next((c.get("message") for c in conds if c.get("status") == "False" and c.get("message")),
                       next((w for w in waiting if w), phase or "Pending"))
    raise InjectionFailed(f"store reader pod {ns}/{name} not Running within {plan.spec['timeout_s']:.0f} s: {why}")


def revert(target, undo: dict, record: dict | None = None) -> str:
    """Delete the reader pod (grace 0) and wait until it is gone; idempotent."""
    from kubernetes.client.exceptions import ApiException

    cluster, ns, name = target.cluster, undo["namespace"], undo["pod"]
    try:
        cluster.core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    except ApiException as err:
        if err.status == 404:
            return NOTHING_TO_UNDO
        raise RevertFailed(f"could not delete the store reader pod {ns}/{name}: {err.status} {err.reason}; "
                           "run `drills revert` again") from None
    if not _exists(cluster, ns, name):  # gone already (grace 0): no watch to wait on for an event that passed
        return REVERTED
    deadline = cluster.clock.deadline(DELETE_TIMEOUT_S, STOP_WALL_FLOOR_S)
    with EventMerger(cluster.clock) as merger:
        merger.watch("pod", cluster.core.list_namespaced_pod, ns, field_selector=f"metadata.name={name}")
        for event in merger.events(deadline):
            if (event is None or event.type == "DELETED") and not _exists(cluster, ns, name):
                return REVERTED
    if _exists(cluster, ns, name):
        raise RevertFailed(f"store reader pod {ns}/{name} still exists after the delete; run `drills revert` again")
    return REVERTED


def verify(target, undo: dict, record: dict | None = None) -> "Reading":
    """Read back that the reader pod is gone (nothing of the drill left on the job's volume)."""
    from drills.faults.readback import Observation, read

    ns, name = undo["namespace"], undo["pod"]

    def reader():
        left = _exists(target.cluster, ns, name)
        return [Observation(f"pod {ns}/{name}", "still there" if left else "gone",
                            f"GET pods in {ns} (metadata.name={name})", not left)], (f"{ns}/{name}",) if left else ()

    return read(KIND, f"{ns}/{name}", reader)


def _exists(cluster, ns: str, name: str) -> bool:
    resp = cluster.core.list_namespaced_pod(ns, field_selector=f"metadata.name={name}", _preload_content=False)
    return bool(json.loads(resp.data).get("items"))
